// Package topic holds the rules of MQTT topic names and topic filters, as
// MQTT 5.0 §4.7 writes them (MQTT 3.1.1 §4.7 says the same): which strings
// are valid names and filters (§4.7.1, §4.7.3), which names a filter
// matches, with the '$' rule of §4.7.2, whether two filters share a name,
// and whether one filter covers another.
//
// A topic name is what a PUBLISH carries: "hearth/lamp/set". A topic
// filter is what a SUBSCRIBE carries, a name whose levels may be the
// wildcards '+' (exactly one level) and, last, '#' (any number of levels,
// the parent level included). Levels are separated by '/' and may be
// empty: "a//b" and "a/" have an empty level.
//
// The package owns these string rules only. It never subscribes or
// publishes, knows nothing of Hearth's own topic layout (prefix, bridges'
// base topics) or of application policies stricter than MQTT's (control
// characters, empty levels, shared subscriptions), which stay with their
// callers, and it imports nothing of ours.
package topic

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest topic name or filter in bytes: a UTF-8 encoded
// string in MQTT carries a two-byte length (MQTT 5.0 §1.5.4).
const MaxLen = 65535

// Error says why a string is not a valid topic name or filter.
type Error struct {
	// Topic is the string checked, as given.
	Topic string
	// Filter is true if Topic was checked as a topic filter, false if as
	// a topic name.
	Filter bool
	// Reason says what is wrong, to follow the quoted topic, such as
	// "'#' must be the whole last topic level".
	Reason string
}

// Error returns `topic filter "a/#/b": '#' must be the whole last topic
// level` or `topic "a/+": contains '+', an MQTT wildcard`; a topic longer
// than 64 bytes is shortened with "…".
func (e *Error) Error() string {
	what := "topic"
	if e.Filter {
		what = "topic filter"
	}
	shown := e.Topic
	if len(shown) > 64 {
		shown = strings.ToValidUTF8(shown[:64], "") + "…"
	}
	return fmt.Sprintf("%s %q: %s", what, shown, e.Reason)
}

// ValidName returns nil if name is a valid topic name (MQTT 5.0 §4.7.3,
// §1.5.4): at least one byte, at most MaxLen bytes, well-formed UTF-8,
// no U+0000 and no wildcard ('+' or '#'). Otherwise it returns an *Error
// saying what is wrong.
func ValidName(name string) error {
	if reason := nameProblem(name); reason != "" {
		return &Error{Topic: name, Reason: reason}
	}
	return nil
}

// ValidFilter returns nil if filter is a valid topic filter (MQTT 5.0
// §4.7.1, §4.7.3, §1.5.4): at least one byte, at most MaxLen bytes,
// well-formed UTF-8, no U+0000, '+' only as a whole level and '#' only as
// the whole last level. Otherwise it returns an *Error saying what is
// wrong. A shared subscription ("$share/<group>/<filter>", §4.8.2) is
// checked as a plain filter.
func ValidFilter(filter string) error {
	if reason := filterProblem(filter); reason != "" {
		return &Error{Topic: filter, Filter: true, Reason: reason}
	}
	return nil
}

// stringProblem checks what names and filters share: length, encoding
// and NUL (MQTT 5.0 §1.5.4, §4.7.3).
func stringProblem(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > MaxLen:
		return fmt.Sprintf("is %d bytes long; MQTT allows at most %d", len(s), MaxLen)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains U+0000 (NUL), which MQTT forbids"
	}
	return ""
}

func nameProblem(name string) string {
	if reason := stringProblem(name); reason != "" {
		return reason
	}
	if i := strings.IndexAny(name, "+#"); i >= 0 {
		return fmt.Sprintf("contains %q, an MQTT wildcard", name[i])
	}
	return ""
}

func filterProblem(filter string) string {
	if reason := stringProblem(filter); reason != "" {
		return reason
	}
	for rest, more := filter, true; more; {
		var level string
		level, rest, more = strings.Cut(rest, "/")
		switch {
		case level != "+" && strings.Contains(level, "+"):
			return "'+' must stand for a whole topic level"
		case level == "#" && more, level != "#" && strings.Contains(level, "#"):
			return "'#' must be the whole last topic level"
		}
	}
	return ""
}

// Match reports whether the topic filter matches the topic name (MQTT 5.0
// §4.7.1): levels compare exactly (case matters), '+' matches exactly one
// level, possibly empty ("a/+" matches "a/" but not "a" or "a/b/c"), and a
// final '#' matches any number of levels, the parent level included
// ("a/#" matches "a", "a/b" and "a/b/c"). A filter starting with a
// wildcard matches no name starting with '$' (§4.7.2): "#" does not match
// "$SYS/uptime", "$SYS/#" does. An invalid filter or name matches nothing.
func Match(filter, name string) bool {
	if filterProblem(filter) != "" || nameProblem(name) != "" || dollarHidden(filter, name) {
		return false
	}
	for {
		f, filterRest, filterMore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		n, nameRest, nameMore := strings.Cut(name, "/")
		if f != "+" && f != n {
			return false
		}
		switch {
		case !filterMore:
			return !nameMore
		case !nameMore:
			return filterRest == "#"
		}
		filter, name = filterRest, nameRest
	}
}

// dollarHidden reports whether filter starts with a wildcard and s, a name
// or a filter, with '$': such a filter matches nothing under s (MQTT 5.0
// §4.7.2).
func dollarHidden(filter, s string) bool {
	return strings.HasPrefix(s, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#"))
}

// Overlap reports whether some valid topic name matches both topic
// filters a and b (a name is a filter without wildcards): "a/+" and
// "+/b" overlap in "a/b", "a/#" and "a" in "a", "#" and "$SYS/x" not at
// all (MQTT 5.0 §4.7.2). It is symmetric, and for a valid name n,
// Overlap(f, n) == Match(f, n). An invalid filter overlaps nothing.
func Overlap(a, b string) bool {
	_, ok := common(a, b)
	return ok
}

// common returns the shortest topic name that both filters a and b
// match, and whether there is a valid one.
func common(a, b string) (string, bool) {
	if filterProblem(a) != "" || filterProblem(b) != "" || dollarHidden(a, b) || dollarHidden(b, a) {
		return "", false
	}
	filterA, filterB := a, b
	var levels []string
	for {
		x, aRest, aMore := strings.Cut(a, "/")
		y, bRest, bMore := strings.Cut(b, "/")
		switch {
		case x == "#" && y == "#":
		case x == "#":
			levels = appendTail(levels, b)
		case y == "#":
			levels = appendTail(levels, a)
		case x != "+" && y != "+" && x != y:
			return "", false
		default:
			level := x
			if x == "+" {
				level = y
			}
			if level == "+" {
				level = "" // an empty level matches '+' of both
			}
			levels = append(levels, level)
			if aMore && bMore {
				a, b = aRest, bRest
				continue
			}
			if aMore && aRest != "#" || bMore && bRest != "#" {
				// One filter has levels left that the other, ended
				// without '#', cannot match.
				return "", false
			}
		}
		break
	}
	name := strings.Join(levels, "/")
	if name == "" {
		// The empty string is no valid name. The filters that match it
		// ("+", "#", "+/#", "/#") match "x" or "/" as well, but "/#"
		// and "+" share none: "/#" matches no other single level.
		for _, name := range []string{"x", "/"} {
			if Match(filterA, name) && Match(filterB, name) {
				return name, true
			}
		}
		return "", false
	}
	return name, len(name) <= MaxLen
}

// appendTail appends the levels of filter rest that a '#' of the other
// filter is left to match: literal levels as they are, '+' as an empty
// level, a final '#' as no level at all.
func appendTail(levels []string, rest string) []string {
	for more := true; more; {
		var level string
		level, rest, more = strings.Cut(rest, "/")
		switch level {
		case "#":
			return levels
		case "+":
			level = ""
		}
		levels = append(levels, level)
	}
	return levels
}

// Covers reports whether every topic name that filter b matches is
// matched by filter a as well: "a/#" covers "a", "a/b", "a/+/c" and
// "a/#"; "a/+" covers "a/b" but not "a/#"; "#" covers "a/b" but not
// "$SYS/x" (MQTT 5.0 §4.7.2). An invalid filter covers nothing and is
// covered by nothing.
func Covers(a, b string) bool {
	if filterProblem(a) != "" || filterProblem(b) != "" || dollarHidden(a, b) {
		return false
	}
	for {
		x, aRest, aMore := strings.Cut(a, "/")
		if x == "#" {
			return true // a/# matches a itself and everything below it
		}
		y, bRest, bMore := strings.Cut(b, "/")
		switch {
		case y == "#":
			return false // b reaches deeper than a does
		case x == "+":
		case x != y || y == "+":
			return false
		}
		switch {
		case !aMore:
			return !bMore
		case !bMore:
			return aRest == "#"
		}
		a, b = aRest, bRest
	}
}
