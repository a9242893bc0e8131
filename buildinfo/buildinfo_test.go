package buildinfo

import (
	"runtime"
	"testing"
)

func TestResolveKeepsWhatTheLinkerStamped(t *testing.T) {
	got := Resolve("v1.2.3", "0123abc")
	want := Info{Version: "v1.2.3", Revision: "0123abc", GoVersion: runtime.Version()}
	if got != want {
		t.Errorf("Resolve = %+v, want %+v", got, want)
	}
	if line := got.Line("hearthd"); line != "hearthd v1.2.3 (revision 0123abc, "+runtime.Version()+")" {
		t.Errorf("Line = %q", line)
	}
}

// A test binary carries no module version and no VCS stamp (go test does
// not stamp): the defaults.
func TestResolveOfAnUnstampedBuild(t *testing.T) {
	for _, v := range []string{"devel", ""} {
		got := Resolve(v, "")
		if got.Version != "devel" || got.Revision != "unknown" {
			t.Errorf("Resolve(%q, \"\") = %+v, want devel and unknown", v, got)
		}
	}
}
