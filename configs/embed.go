// Package configs holds the documented sample configuration, hearth.yaml,
// and compiles it into the binaries so that `hearthd -demo` and
// `hearth-sim` run on a fresh machine without any file.
package configs

import _ "embed"

// Sample is configs/hearth.yaml as it was when the binary was built.
//
//go:embed hearth.yaml
var Sample []byte

// SampleName is the name errors in Sample are reported under.
const SampleName = "configs/hearth.yaml (built in)"
