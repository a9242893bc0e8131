package config

import (
	"os"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// configs/homie.yaml parses and means what its comments say.
func TestSampleHomieConfig(t *testing.T) {
	data, err := os.ReadFile("../configs/homie.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("configs/homie.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Service("homie")
	if !ok || s.Protocol != ProtocolHomie || s.BaseTopic != "homie" || s.Retry.MaxAttempts != 3 || s.MQTTUsername != "homie" {
		t.Errorf("service homie = %+v", s)
	}
	if d, _ := c.Device("kitchen_light"); d.Class != devices.Light || d.Address != "kitchen-light/light/power,brightness" {
		t.Errorf("kitchen_light = %+v", d)
	}
	if d, _ := c.Device("garden_valve"); !d.Sleep.Sleepy || d.Sleep.WakeInterval != 15*time.Minute || d.Sleep.AwakeWindow != 10*time.Second {
		t.Errorf("garden_valve = %+v", d)
	}
}
