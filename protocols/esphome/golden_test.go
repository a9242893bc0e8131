package esphome

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/documented_payloads.golden")

// The payloads ESPHome's docs and firmware publish (testdata, with their
// sources) decode to the state in the golden file.
func TestDocumentedPayloadsDecode(t *testing.T) {
	in, err := os.ReadFile("testdata/documented_payloads.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(in))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			t.Fatalf("testdata line %q is not <component> <sub-topic> <payload>", line)
		}
		comp, sub, p := f[0], f[1], []byte(f[2])
		var got any
		var derr error
		switch {
		case comp == "status":
			online, ok := ParseStatus(p)
			if !ok {
				derr = fmt.Errorf("not a status")
			}
			got = map[string]any{"online": online}
		case sub == SubPositionState:
			got, derr = DecodePosition(p)
		default:
			got, derr = DecodeState(comp, p)
		}
		if derr != nil {
			t.Errorf("%s: %v", line, derr)
			continue
		}
		j, _ := json.Marshal(got)
		fmt.Fprintf(&out, "%s %s %s\n\t→ %s\n", comp, sub, p, j)
	}
	const golden = "testdata/documented_payloads.golden"
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("decoded payloads differ from %s (go test -update to rewrite):\n%s", golden, out.String())
	}
}
