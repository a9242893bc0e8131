package httpdev

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseState: any body is a state of plain values or a clear error.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"state":"CLOSE","position":0}`))
	f.Add([]byte(`{"state":"closed"}`))
	f.Add([]byte(`{"a":[1]}`))
	f.Add([]byte(`1e999`))
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := ParseState(body)
		if err != nil {
			if err.Error() == "" || st != nil {
				t.Fatalf("error %q with state %v", err, st)
			}
			return
		}
		if len(st) == 0 || len(st) > MaxStateKeys {
			t.Fatalf("state %v", st)
		}
		for k, v := range st {
			switch v.(type) {
			case string, float64, bool:
			default:
				t.Fatalf("attribute %q: %T", k, v)
			}
		}
	})
}

// FuzzParseAddress: any address is refused clearly, or makes a URL that
// stays under the base URL, one path segment per segment.
func FuzzParseAddress(f *testing.F) {
	f.Add("doors/1")
	f.Add("../etc")
	f.Add("a b/%2e")
	f.Fuzz(func(t *testing.T, raw string) {
		addr, err := ParseAddress(raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		u, err := url.Parse(ResourceURL("https://h/api", addr))
		if err != nil {
			t.Fatalf("address %q: URL %v", raw, err)
		}
		if u.Host != "h" || !strings.HasPrefix(u.Path, "/api/") || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("address %q: URL %s leaves the base", raw, u)
		}
		if addr.String() != raw {
			t.Fatalf("address %q reads back as %q", raw, addr)
		}
	})
}
