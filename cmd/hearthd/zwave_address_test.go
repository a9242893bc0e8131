package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/protocols/zwavejs"
)

// config mirrors zwavejs.ParseAddress (it may not import protocols): an
// address config accepts on a zwavejs service is one the adapter reaches,
// with the same node_names. A mismatch would let a device through config
// that the adapter then drops.
func FuzzZWaveConfigAddressIsTheAdapters(f *testing.F) {
	for _, s := range []string{"kitchen_double/2", "bed/7", "12/2", "Living Room/Lamp", "a/b/c", "_x", "driver", "0/0/0", "hall/(!)", "12/128", "x/y/007"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, addr string, names bool) {
		q, _ := json.Marshal(addr) // a YAML double-quoted scalar
		yaml := "services:\n  zw:\n    protocol: zwavejs\n    node_names: " + strconv.FormatBool(names) + "\ndevices:\n  d:\n    class: switch\n    address: " + string(q) + "\n"
		_, cerr := config.Parse("f.yaml", []byte(yaml))
		_, aerr := zwavejs.ParseAddress(addr, names)
		if cerr == nil && aerr != nil {
			t.Fatalf("config accepts address %q (node_names %v), the adapter rejects it: %v", addr, names, aerr)
		}
	})
}
