package main

import "runtime/debug"

// version and revision are set at build time:
//
//	go build -ldflags "-X main.version=1.2.0 -X main.revision=$(git rev-parse HEAD)" ./cmd/hearthd
var version = "devel"

var revision = ""

// buildVersion is hearthd's version: the one set at build time, else the
// module version when built from a tagged module (go install ...@v1.2.0),
// else "devel".
func buildVersion() string {
	if version != "devel" && version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// buildRevision is the VCS revision hearthd was built from: the one set
// at build time, else the one the Go toolchain stamped (vcs.revision,
// with "-dirty" when vcs.modified), else "".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "-dirty"
	}
	return rev
}
