package hearth_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// binaries are the programs scripts/build.sh builds.
var binaries = []string{"hearthd", "hearthctl", "hearth-sim"}

// versionOf runs bin -version and returns its output.
func versionOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", bin, err, out)
	}
	return string(out)
}

// scripts/build.sh stamps the version and revision it is given into all
// three binaries with -ldflags -X, and each prints them with -version.
func TestBuildScriptStampsVersionAndRevision(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("sh", "scripts/build.sh")
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-rc.1", "REVISION=0123456789abcdef0123456789abcdef01234567", "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, b)
	}
	for _, name := range binaries {
		got := versionOf(t, filepath.Join(out, name))
		want := name + " v9.8.7-rc.1 (revision 0123456789abcdef0123456789abcdef01234567, " + runtime.Version() + ")\n"
		if got != want {
			t.Errorf("%s -version = %q, want %q", name, got, want)
		}
	}
}

// Without VERSION and REVISION, scripts/build.sh asks git.
func TestBuildScriptTakesTheVersionFromGit(t *testing.T) {
	describe, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "scripts/build.sh")
	cmd.Env = append(os.Environ(), "VERSION=", "REVISION=", "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, b)
	}
	got := versionOf(t, filepath.Join(out, "hearthctl"))
	want := "hearthctl " + strings.TrimSpace(string(describe)) + " (revision " + strings.TrimSpace(string(head)) + ", " + runtime.Version() + ")\n"
	if got != want {
		t.Errorf("hearthctl -version = %q, want %q", got, want)
	}
}

// A plain go build, with no -ldflags and no VCS stamp, says devel.
func TestPlainBuildSaysDevel(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out+string(filepath.Separator), "./cmd/hearthd")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got := versionOf(t, filepath.Join(out, "hearthd"))
	want := "hearthd devel (revision unknown, " + runtime.Version() + ")\n"
	if got != want {
		t.Errorf("hearthd -version = %q, want %q", got, want)
	}
}
