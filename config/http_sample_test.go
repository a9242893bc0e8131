package config

import "testing"

// configs/http.yaml loads: its http service and both devices, the door
// safety-critical, read back at its attempt's timeout.
func TestHTTPSampleLoads(t *testing.T) {
	c, err := Load("../configs/http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Service("garage-ctl")
	if !ok || s.Protocol != ProtocolHTTP || s.URL != "http://127.0.0.1:8090/api" || s.Method != "PUT" || s.Headers["Authorization"] == "" {
		t.Fatalf("service %+v", s)
	}
	g, _ := c.Device("garage")
	h, _ := c.Device("heatpump")
	if len(c.Devices) != 2 || g.Address != "doors/1" || !g.ReadBack || g.Service != "garage-ctl" || h.Address != "heatpump" {
		t.Fatalf("devices %+v", c.Devices)
	}
}
