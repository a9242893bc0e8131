package topic

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
)

func TestValidNameAcceptsNamesWithoutWildcards(t *testing.T) {
	for _, name := range []string{
		"a", "hearth/lamp/set", "/", "a//b", "a/", "/a", "$SYS/broker", "zigbee2mqtt/Front Door",
		"ünïcödé/ℹ", "a\tb", strings.Repeat("x", MaxLen),
	} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%.20q) = %v, want nil", name, err)
		}
	}
}

func TestValidNameSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"", `topic "": must not be empty`},
		{"a/+", `topic "a/+": contains '+', an MQTT wildcard`},
		{"a/#", `topic "a/#": contains '#', an MQTT wildcard`},
		{"a+b", `topic "a+b": contains '+', an MQTT wildcard`},
		{"a\x00b", `topic "a\x00b": contains U+0000 (NUL), which MQTT forbids`},
		{"a\xffb", `topic "a\xffb": is not valid UTF-8`},
		{"\xed\xa0\x80", `topic "\xed\xa0\x80": is not valid UTF-8`}, // a UTF-16 surrogate, U+D800 (MQTT 5.0 §1.5.4)
		{strings.Repeat("x", MaxLen+1), `topic "` + strings.Repeat("x", 64) + `…": is 65536 bytes long; MQTT allows at most 65535`},
	} {
		err := ValidName(tc.name)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ValidName(%.20q) = %v, want %s", tc.name, err, tc.want)
		}
		var e *Error
		if !errors.As(err, &e) || e.Topic != tc.name || e.Filter {
			t.Errorf("ValidName(%.20q) = %#v, want an *Error for the name", tc.name, err)
		}
	}
}

func TestValidFilterAcceptsWholeLevelWildcards(t *testing.T) {
	for _, filter := range []string{
		"a", "#", "+", "a/#", "a/+", "+/+", "+/#", "a/+/c", "/", "/+", "+/", "a//b", "$SYS/#",
		"$share/group/a/+", "a/b/c/#", strings.Repeat("+/", MaxLen/2) + "#",
	} {
		if err := ValidFilter(filter); err != nil {
			t.Errorf("ValidFilter(%.20q) = %v, want nil", filter, err)
		}
	}
}

func TestValidFilterSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		filter, want string
	}{
		{"", `topic filter "": must not be empty`},
		{"a/#/b", `topic filter "a/#/b": '#' must be the whole last topic level`},
		{"#/b", `topic filter "#/b": '#' must be the whole last topic level`},
		{"a#", `topic filter "a#": '#' must be the whole last topic level`},
		{"a/b#", `topic filter "a/b#": '#' must be the whole last topic level`},
		{"a/##", `topic filter "a/##": '#' must be the whole last topic level`},
		{"a+", `topic filter "a+": '+' must stand for a whole topic level`},
		{"a/+b/c", `topic filter "a/+b/c": '+' must stand for a whole topic level`},
		{"++", `topic filter "++": '+' must stand for a whole topic level`},
		{"+#", `topic filter "+#": '+' must stand for a whole topic level`}, // the level's '+' is named first
		{"a\x00/#", `topic filter "a\x00/#": contains U+0000 (NUL), which MQTT forbids`},
		{"a/\xc3", `topic filter "a/\xc3": is not valid UTF-8`},
		{strings.Repeat("+/", MaxLen/2) + "a/#", `topic filter "` + strings.Repeat("+/", 32) + `…": is 65537 bytes long; MQTT allows at most 65535`},
	} {
		err := ValidFilter(tc.filter)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ValidFilter(%.20q) = %v, want %s", tc.filter, err, tc.want)
		}
		var e *Error
		if !errors.As(err, &e) || e.Topic != tc.filter || !e.Filter {
			t.Errorf("ValidFilter(%.20q) = %#v, want an *Error for the filter", tc.filter, err)
		}
	}
}

func TestErrorShortensLongTopicsOnARuneBoundary(t *testing.T) {
	e := &Error{Topic: strings.Repeat("a", 63) + "ü/+", Reason: "r"}
	if got, want := e.Error(), `topic "`+strings.Repeat("a", 63)+`…": r`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		filter, name string
		want         bool
	}{
		// Exact.
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a", "A", false}, // names are case-sensitive
		{"hearth/lamp/set", "hearth/lamp/set", true},

		// '+' is exactly one level, possibly empty.
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/+", "a", false},
		{"a/+", "a/", true},
		{"+/+", "/finance", true},
		{"/+", "/finance", true},
		{"+", "/finance", false},
		{"+", "a", true},
		{"a/+/c", "a/b/c", true},
		{"a/+/c", "a//c", true},
		{"a/+/c", "a/b/d", false},
		{"hearth/+/set", "hearth/lamp/set", true},
		{"hearth/+/set", "hearth/living room/lamp/set", false},

		// '#' is any number of levels, the parent level included.
		{"#", "a", true},
		{"#", "a/b/c", true},
		{"#", "/", true},
		{"a/#", "a", true},
		{"a/#", "a/b", true},
		{"a/#", "a/b/c", true},
		{"a/#", "a/", true},
		{"a/#", "ab", false},
		{"a/#", "b/a", false},
		{"a/b/#", "a", false},
		{"a/+/#", "a", false},
		{"a/+/#", "a/b", true},
		{"+/#", "a/b", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/living room/lamp", true},
		{"zigbee2mqtt/#", "zigbee2mqtt", true},

		// A trailing slash makes an empty last level.
		{"a/", "a/", true},
		{"a/", "a", false},
		{"a", "a/", false},
		{"a//b", "a//b", true},
		{"a//b", "a/b", false},

		// '$' names match no filter that starts with a wildcard
		// (MQTT 5.0 §4.7.2), but do match explicit ones.
		{"#", "$SYS/broker/uptime", false},
		{"+/broker/uptime", "$SYS/broker/uptime", false},
		{"+/#", "$SYS/x", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"$SYS/+/uptime", "$SYS/broker/uptime", true},
		{"$SYS", "$SYS", true},
		{"a/#", "a/$SYS", true}, // '$' only matters at the start
		{"a/+", "a/$x", true},

		// Invalid filters and names match nothing, not even themselves.
		{"a/#/b", "a/x/b", false},
		{"a/#/b", "a/#/b", false},
		{"a+", "a+", false},
		{"", "", false},
		{"+", "", false},
		{"#", "a/+", false},
		{"a/+", "a/#", false},
		{"#", "a\x00", false},
		{"#", "\xff", false},
		{"#", strings.Repeat("x", MaxLen+1), false},
	}
	for _, tc := range tests {
		if got := Match(tc.filter, tc.name); got != tc.want {
			t.Errorf("Match(%.20q, %.20q) = %v, want %v", tc.filter, tc.name, got, tc.want)
		}
	}
}

func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		// What config asks: can a trigger's filter see Hearth's intake?
		{"hearth/+/set", "hearth/+/set", true},
		{"hearth/front_door/#", "hearth/+/set", true},
		{"hearth/#", "hearth/+/set", true},
		{"#", "hearth/+/set", true},
		{"+/+/set", "hearth/+/set", true},
		{"hearth/+/result", "hearth/+/set", false},
		{"hearth/front_door", "hearth/+/set", false},
		{"zigbee2mqtt/+/action", "hearth/+/set", false},
		{"hearth/a/set/x", "hearth/+/set", false},
		{"hearth/#", "hearth", true},
		{"zigbee2mqtt/+/set", "zigbee2mqtt/Front Door/set", true},
		{"zigbee2mqtt/+/set/#", "zigbee2mqtt/lamp/set/state", true},
		{"zigbee2mqtt/+/set", "zigbee2mqtt/bridge/request/permit_join", false},

		// Base topics as roots: a/# and b/# overlap when one is a or
		// under it.
		{"z2m/#", "z2m/#", true},
		{"z2m/#", "z2m/hall/#", true},
		{"z2m/#", "z2m2/#", false},
		{"home/z2m/#", "home/#", true},

		// Wildcards meeting wildcards.
		{"a/+", "+/b", true},
		{"+", "#", true},
		{"+", "+", true},
		{"a/+", "a", false},
		{"a/+/#", "a", false},
		{"a/+/#", "a/#", true},
		{"a/+/c", "a/b/+", true},
		{"a/+/c", "a/b/d", false},
		{"/#", "#", true},    // in "/"
		{"+/#", "+/#", true}, // in "x"
		{"/#", "+", false},   // "/#" matches no single level but the empty one, no valid name
		{"/#", "+/+", true},  // in "/"
		{"/", "+/#", true},

		// A filter starting with a wildcard shares no name with one that
		// starts with '$' (MQTT 5.0 §4.7.2).
		{"#", "$SYS/x", false},
		{"+/status", "$hub/status", false},
		{"+/#", "$SYS/#", false},
		{"$SYS/#", "$SYS/+", true},
		{"a/#", "a/$x", true},

		// Invalid filters overlap nothing.
		{"a/#/b", "a/#/b", false},
		{"#", "", false},
		{"#", "a+", false},

		// The shared name must be valid, so no longer than MaxLen.
		{strings.Repeat("x", 40000) + "/+", "+/" + strings.Repeat("y", 40000), false},
		{strings.Repeat("x", 30000) + "/+", "+/" + strings.Repeat("y", 30000), true},
	} {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%.20q, %.20q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
		if got := Overlap(tc.b, tc.a); got != tc.want {
			t.Errorf("Overlap(%.20q, %.20q) = %t, want %t (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"zigbee2mqtt/#", "zigbee2mqtt/hall_button/action", true},
		{"zigbee2mqtt/#", "zigbee2mqtt", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/#", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/+/action", true},
		{"zigbee2mqtt/#", "zigbee/x", false},
		{"zigbee2mqtt/#", "+/hall_button/action", false},
		{"a/+", "a/b", true},
		{"a/+", "a/+", true},
		{"a/+", "a/#", false},
		{"a/+", "a/b/c", false},
		{"a/+", "a", false},
		{"a/b", "a/+", false},
		{"a/b", "a/b", true},
		{"a/b", "a", false},
		{"a", "a/#", false},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"hearth/+/set", "hearth/lamp/set", true},
		{"hearth/+/set", "hearth/#", false},
		{"a/#", "a/#/b", false}, // an invalid filter is covered by nothing
		{"a/#/b", "a/x/b", false},
	} {
		if got := Covers(tc.a, tc.b); got != tc.want {
			t.Errorf("Covers(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}

// Covers agrees with Match: whenever a covers b, every name b matches, a
// matches.
func TestCoversAgreesWithMatch(t *testing.T) {
	filters := []string{"#", "a/#", "a/+", "a/b", "a", "+/b", "a/+/c", "a/b/#", "+", "+/+", "$SYS/#"}
	names := []string{"a", "a/b", "a/c", "a/b/c", "b/b", "x", "$SYS/a", "a/x/c"}
	for _, a := range filters {
		for _, b := range filters {
			if !Covers(a, b) {
				continue
			}
			for _, name := range names {
				if Match(b, name) && !Match(a, name) {
					t.Errorf("Covers(%q, %q), but %q matches %q and not %q", a, b, name, b, a)
				}
			}
		}
	}
}

var seeds = [][2]string{
	{"hearth/+/set", "hearth/lamp/set"}, {"hearth/+/set", "hearth/lamp/get"}, {"hearth/+/set", "hearth//set"},
	{"hearth/+/set", "hearth/a/b/set"}, {"a/#", "a"}, {"a/+/#", "a/b"}, {"+", "a/b"}, {"#", "$SYS/x"},
	{"+/x", "$a/x"}, {"$a/x", "$a/x"}, {"a/+", "a/"}, {"/+", "/x"}, {"a/#/b", "a/x/b"}, {"+/#", "$SYS/#"},
	{"a/+/c", "+/b/#"}, {"", "#"}, {"a\x00", "a"}, {"\xff/#", "#"},
}

// FuzzMatch checks Match against paho.golang's router (an independent
// reading of MQTT 5.0 §4.7) on every valid filter and name, except that a
// filter starting with a wildcard never matches a name starting with '$'
// (§4.7.2), which the router does not implement; and that Match never
// holds for an invalid filter or name and agrees with Overlap.
func FuzzMatch(f *testing.F) {
	for _, seed := range seeds {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, filter, name string) {
		got := Match(filter, name)
		filterErr, nameErr := ValidFilter(filter), ValidName(name)
		if got && (filterErr != nil || nameErr != nil) {
			t.Fatalf("Match(%q, %q), but ValidFilter: %v, ValidName: %v", filter, name, filterErr, nameErr)
		}
		if nameErr != nil {
			return
		}
		if !Match(name, name) {
			t.Errorf("the valid name %q does not match itself as a filter", name)
		}
		if o := Overlap(filter, name); o != got {
			t.Errorf("Match(%q, %q) = %v, but Overlap = %v", filter, name, got, o)
		}
		// paho.golang's router takes any route that starts with "$share"
		// for a shared subscription.
		if filterErr != nil || strings.HasPrefix(strings.ToLower(filter), "$share") {
			return
		}
		router := paho.NewStandardRouter()
		routed := false
		router.RegisterHandler(filter, func(*paho.Publish) { routed = true })
		router.Route(&packets.Publish{Topic: name, Properties: &packets.Properties{}})
		want := routed && !(strings.HasPrefix(name, "$") && strings.ContainsAny(filter[:1], "+#"))
		if got != want {
			t.Errorf("Match(%q, %q) = %v; paho's router says %v", filter, name, got, want)
		}
	})
}

// FuzzValidFilter checks that the validity rules agree with each other: a
// valid name is a valid filter, a valid filter without wildcards a valid
// name, and an invalid one comes with an *Error whose reason is stated.
func FuzzValidFilter(f *testing.F) {
	for _, seed := range seeds {
		f.Add(seed[0])
		f.Add(seed[1])
	}
	f.Fuzz(func(t *testing.T, s string) {
		filterErr, nameErr := ValidFilter(s), ValidName(s)
		if nameErr == nil && filterErr != nil {
			t.Errorf("%q is a valid name but not a valid filter: %v", s, filterErr)
		}
		if filterErr == nil && !strings.ContainsAny(s, "+#") && nameErr != nil {
			t.Errorf("%q is a valid filter without wildcards but not a valid name: %v", s, nameErr)
		}
		for _, err := range []error{filterErr, nameErr} {
			var e *Error
			if err != nil && (!errors.As(err, &e) || e.Topic != s || e.Reason == "" || !utf8.ValidString(err.Error())) {
				t.Errorf("error for %q: %#v, want an *Error with a reason", s, err)
			}
		}
		if filterErr == nil && !Overlap(s, s) {
			t.Errorf("the valid filter %q shares no name with itself", s)
		}
	})
}

// FuzzOverlap checks that Overlap is symmetric, that the shared name it
// finds is valid and matched by both filters, and that Covers implies it.
func FuzzOverlap(f *testing.F) {
	for _, seed := range seeds {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := Overlap(a, b)
		if Overlap(b, a) != got {
			t.Fatalf("Overlap(%q, %q) = %v, but not the other way round", a, b, got)
		}
		name, ok := common(a, b)
		if ok != got {
			t.Fatalf("Overlap(%q, %q) = %v, but common found %q, %v", a, b, got, name, ok)
		}
		if got && (ValidName(name) != nil || !Match(a, name) || !Match(b, name)) {
			t.Errorf("Overlap(%q, %q): the shared name %q is invalid or not matched by both", a, b, name)
		}
		if Covers(a, b) {
			if !got {
				t.Errorf("Covers(%q, %q), but they share no name", a, b)
			}
			if n, ok := common(b, b); !ok || !Match(a, n) {
				t.Errorf("Covers(%q, %q), but %q matches only b", a, b, n)
			}
		}
	})
}
