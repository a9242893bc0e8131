package simulator

import "testing"

// The Homie side's set handling takes any topic level and payload
// without a panic; what it publishes is only the property's value (and
// its $target), never another topic.
func FuzzHomieSet(f *testing.F) {
	for _, s := range []string{"true", "false", "TRUE", "50", "101", "-1", "", "1e2"} {
		f.Add("light", "brightness", []byte(s))
	}
	f.Add("light", "power", []byte("true"))
	f.Add("x", "y", []byte("true"))
	f.Fuzz(func(t *testing.T, node, prop string, p []byte) {
		for _, root := range []string{"homie", "homie/5"} {
			s, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{{Name: "kitchen-light/light/power,brightness", Class: ClassLight, Protocol: ProtocolHomie, BaseTopic: root}}})
			if err != nil {
				t.Fatal(err)
			}
			b := s.homies[0]
			outs, fire := s.homieSet(b, node, prop, "t", p, false)
			fire()
			for _, o := range outs {
				if pt := b.prefix + "/" + node + "/" + prop; o[0] != pt && o[0] != pt+"/$target" {
					t.Fatalf("published on %s for a set of %s/%s", o[0], node, prop)
				}
			}
		}
	})
}
