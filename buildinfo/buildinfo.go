// Package buildinfo says which build of Hearth is running: the version and
// VCS revision a release build stamps into each binary's main package with
// the linker (-ldflags "-X main.version=... -X main.revision=...", as
// scripts/build.sh and the Dockerfile do), and the Go release it was built
// with. It owns the -version line of hearthd, hearthctl and hearth-sim and
// imports nothing of Hearth's.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is one binary's build.
type Info struct {
	// Version is what the build stamped, such as "v0.4.0-3-g1a2b3c4";
	// else the module's version when go install built a tagged module
	// (github.com/hearthd/hearth/cmd/hearthd@v0.4.0); else "devel".
	Version string
	// Revision is the VCS commit: the stamped one, else the vcs.revision
	// Go records when it builds inside a Git checkout (not with
	// -buildvcs=false), else "unknown".
	Revision string
	// GoVersion is the Go release the binary was built with: "go1.26.8".
	GoVersion string
}

// Resolve returns the build of a binary whose main package holds version
// and revision as the linker left them (package main's defaults are
// "devel" and ""). From runtime/debug.ReadBuildInfo: version "devel" or ""
// falls back to the module's version, revision "" to vcs.revision; then
// to "devel" and "unknown".
func Resolve(version, revision string) Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if (info.Version == "" || info.Version == "devel") && ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Revision == "" && ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Revision = s.Value
			}
		}
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// Line is the -version line of program: "hearthd v0.4.0 (revision
// 1a2b3c4, go1.26.8)".
func (i Info) Line(program string) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", program, i.Version, i.Revision, i.GoVersion)
}
