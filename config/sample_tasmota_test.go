package config

import "testing"

// TestSampleTasmotaExample keeps the commented tasmota example of the
// sample configuration parsing, with the addresses it documents.
func TestSampleTasmotaExample(t *testing.T) {
	c, err := Parse("configs/hearth.yaml (tasmota example)", sampleBlock(t, "tasmota example"))
	if err != nil {
		t.Fatalf("Parse(tasmota example) error:\n%v", err)
	}
	s, _ := c.Service("wifi")
	if s.Protocol != ProtocolTasmota || s.FullTopic != DefaultTasmotaFullTopic || s.Retry.MaxAttempts != 3 || len(c.Devices) != 4 {
		t.Errorf("service %+v with %d devices; want tasmota, the default FullTopic, 3 attempts, 4 devices", s, len(c.Devices))
	}
	if d, _ := c.Device("bedroom_blind"); d.Address != "bedroom_shutter/1" {
		t.Errorf("bedroom_blind address %q", d.Address)
	}
}
