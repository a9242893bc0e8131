package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// walker walks a yaml.Node tree against the schema, collecting problems
// and remembering the line of every key it meets.
type walker struct {
	file     string
	problems []*Problem
	lines    map[string]int  // dotted key → line of the key
	reported map[string]bool // dotted keys that already have a problem
}

func newWalker(file string) *walker {
	return &walker{file: file, lines: map[string]int{}, reported: map[string]bool{}}
}

func (w *walker) report(line int, key string, err error) {
	w.problems = append(w.problems, &Problem{File: w.file, Line: line, Key: key, Message: err.Error()})
	w.reported[key] = true
}

func (w *walker) reportf(line int, key, format string, args ...any) {
	w.report(line, key, fmt.Errorf(format, args...))
}

// at returns the first of keys that appears in the file, and its line; or
// the last of keys and line 0 when none does.
func (w *walker) at(keys ...string) (string, int) {
	for _, k := range keys {
		if line, ok := w.lines[k]; ok {
			return k, line
		}
	}
	return keys[len(keys)-1], 0
}

// result returns the problems as an *Error sorted by line, or nil.
func (w *walker) result() error {
	if len(w.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(w.problems, func(a, b *Problem) int { return a.Line - b.Line })
	return &Error{Problems: w.problems}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes data and returns its root node, or nil when the file
// is empty (or only comments or null) or cannot be decoded; the latter is
// reported.
func (w *walker) document(data []byte) *yaml.Node {
	// yaml.v3 reports bad encoding without a line; find it ourselves.
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !utf8.Valid(line) {
			w.reportf(i+1, "", "not valid UTF-8; a config file is UTF-8 text")
			return nil
		}
		for _, r := range string(line) {
			if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
				w.reportf(i+1, "", "control character %U is not allowed", r)
				return nil
			}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		w.yamlError(err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil && len(next.Content) > 0 && !isNull(next.Content[0]):
		w.reportf(next.Line, "", "a second YAML document; a config file holds one")
	case err != nil && !errors.Is(err, io.EOF):
		w.yamlError(err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil
	}
	return doc.Content[0]
}

// yamlError reports a syntax error with yaml's line. yaml.v3 leaves the
// line out when the problem is on the first line.
func (w *walker) yamlError(err error) {
	line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	w.reportf(line, "", "invalid YAML: %s", msg)
}

// A field is one key a mapping may hold and what to do with its value.
type field struct {
	key  string
	walk func(w *walker, n *yaml.Node, key string)
}

// mapping walks the mapping n at key: each entry goes to the field of the
// same name; an entry no field takes is reported with the keys allowed.
// A null n is an empty mapping.
func (w *walker) mapping(n *yaml.Node, key string, fields ...field) {
	w.entries(n, key, func(name string, v *yaml.Node, k string) {
		for _, f := range fields {
			if f.key == name {
				f.walk(w, v, k)
				return
			}
		}
		known := make([]string, len(fields))
		for i, f := range fields {
			known[i] = f.key
		}
		hint := ""
		if s := closest(name, known); s != "" {
			hint = fmt.Sprintf("did you mean %s? ", s)
		}
		w.reportf(w.lines[k], k, "unknown key (%sknown here: %s)", hint, strings.Join(known, ", "))
	})
}

// entries calls fn for each entry of the mapping n at key, in file order,
// with the entry's name, value and dotted key. It reports what is not a
// mapping, keys that are not names, merge keys and duplicate keys. A null
// n is an empty mapping.
func (w *walker) entries(n *yaml.Node, key string, fn func(name string, v *yaml.Node, key string)) {
	line := n.Line
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		w.reportf(line, key, "want a mapping, got %s", describe(n))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := resolve(n.Content[i]), n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			w.reportf(n.Content[i].Line, key, "want a key name, got %s", describe(kn))
			continue
		}
		k := join(key, kn.Value)
		if kn.ShortTag() == "!!merge" {
			w.reportf(kn.Line, key, "merge keys (<<) are not supported; write the keys out")
			continue
		}
		if l, dup := first[kn.Value]; dup {
			w.reportf(kn.Line, k, "duplicate key (first at line %d)", l)
			continue
		}
		first[kn.Value] = kn.Line
		w.lines[k] = kn.Line
		fn(kn.Value, v, k)
	}
}

// section is a field whose value is a mapping of fields.
func section(name string, fields ...field) field {
	return field{name, func(w *walker, n *yaml.Node, key string) { w.mapping(n, key, fields...) }}
}

// value is a field whose value is a scalar of type T, stored in *p when it
// decodes and passes every check. A null value leaves *p alone, so that it
// keeps its default.
func value[T any](name string, p *T, checks ...func(T) error) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		line := n.Line
		n = resolve(n)
		if isNull(n) {
			return
		}
		v, err := decode[T](n)
		for _, check := range checks {
			if err != nil {
				break
			}
			err = check(v)
		}
		if err != nil {
			w.report(line, key, err)
			return
		}
		*p = v
	}}
}

// decode decodes the scalar n as a T: a string (from any scalar, as
// written), bool, int, float64, time.Duration or devices.Class.
func decode[T any](n *yaml.Node) (T, error) {
	var v T
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode {
		tag = ""
	}
	var err error
	switch p := any(&v).(type) {
	case *string:
		if tag == "" {
			return v, fmt.Errorf("want a string, got %s", describe(n))
		}
		*p = n.Value
	case *devices.Class:
		if tag == "" {
			return v, fmt.Errorf("want a class, got %s", describe(n))
		}
		*p, err = devices.ParseClass(n.Value)
	case *retry.Strategy:
		if tag != "!!str" {
			return v, fmt.Errorf("want a backoff name, got %s", describe(n))
		}
		*p, err = retry.ParseStrategy(n.Value)
	case *retry.Jitter:
		if tag != "!!str" {
			return v, fmt.Errorf("want a jitter name, got %s", describe(n))
		}
		*p, err = retry.ParseJitter(n.Value)
	case *retry.Class:
		if tag != "!!str" {
			return v, fmt.Errorf("want an error class, got %s", describe(n))
		}
		*p, err = retry.ParseClass(n.Value)
	case *bool:
		if tag != "!!bool" {
			return v, fmt.Errorf("want true or false, got %s", describe(n))
		}
		err = n.Decode(p)
	case *int:
		if tag != "!!int" {
			return v, fmt.Errorf("want a whole number, got %s", describe(n))
		}
		err = n.Decode(p)
	case *float64:
		if tag != "!!int" && tag != "!!float" {
			return v, fmt.Errorf("want a number, got %s", describe(n))
		}
		if err = n.Decode(p); err == nil && (math.IsInf(*p, 0) || math.IsNaN(*p)) {
			err = fmt.Errorf("want a finite number, got %s", n.Value)
		}
	case *time.Duration:
		const hint = "use a Go duration such as 10s"
		switch tag {
		case "!!int", "!!float":
			return v, fmt.Errorf("want a duration, got %s (no unit); %s", n.Value, hint)
		case "!!str":
			if *p, err = time.ParseDuration(n.Value); err != nil {
				return v, fmt.Errorf("want a duration, got %s; %s", describe(n), hint)
			}
		default:
			return v, fmt.Errorf("want a duration, got %s; %s", describe(n), hint)
		}
	default:
		panic(fmt.Sprintf("config: no decoding for %T", v))
	}
	return v, err
}

// classes is a field whose value is a list of error classes (or groups),
// stored in *p when every item is known. An empty list is stored as empty,
// not left at its default; a null value leaves *p alone.
func classes(name string, p *[]retry.Class) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		line, alias := n.Line, n.Kind == yaml.AliasNode
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			w.reportf(line, key, "want a list of error classes, such as [transient], got %s", describe(n))
			return
		}
		list := []retry.Class{}
		ok := true
		for _, item := range n.Content {
			c, err := decode[retry.Class](resolve(item))
			if err != nil {
				at := item.Line
				if alias {
					at = line // where this key uses the list, not where it was written
				}
				w.report(at, key, err)
				ok = false
				continue
			}
			list = append(list, c)
		}
		if ok {
			*p = list
		}
	}}
}

// stringMap is a field whose value is a mapping of names to strings, such
// as HTTP headers, stored in *p when every entry decodes and passes
// check(name, value). An entry's problem is reported at its own key; a
// null value leaves *p alone.
func stringMap(name string, p *map[string]string, check func(name, value string) error) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		m := map[string]string{}
		ok := true
		w.entries(n, key, func(name string, v *yaml.Node, k string) {
			line := v.Line
			v = resolve(v)
			var err error
			var s string
			if isNull(v) {
				err = errors.New("want a string, got null")
			} else if s, err = decode[string](v); err == nil {
				err = check(name, s)
			}
			if err != nil {
				w.report(line, k, err)
				ok = false
				return
			}
			m[name] = s
		})
		if r := resolve(n); ok && r.Kind == yaml.MappingNode {
			*p = m
		}
	}}
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe shows a node as an error message quotes what it got.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			s := n.Value
			if utf8.RuneCountInString(s) > 40 {
				s = string([]rune(s)[:40]) + "…"
			}
			return strconv.Quote(s)
		case "!!null":
			return "null"
		}
		return n.Value
	}
	return "nothing"
}

var word = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// join appends name to the dotted key, quoting a name that is not a plain
// word.
func join(key, name string) string {
	if !word.MatchString(name) {
		name = strconv.Quote(name)
	}
	if key == "" {
		return name
	}
	return key + "." + name
}

// closest returns the candidate nearest to s, if it is near enough to be
// a likely typo, else "".
func closest(s string, candidates []string) string {
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if d := distance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= 1 || (bestDist == 2 && len(best) >= 5) {
		return best
	}
	return ""
}

// distance is the optimal string alignment distance between a and b, in
// bytes: insertions, deletions, substitutions and swaps of neighbours.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
