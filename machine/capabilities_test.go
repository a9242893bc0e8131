package machine

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// A resumed attempt is confirmed by the state heard since the start after
// the device's own rounding once its capabilities are known, and only
// exactly before.
func TestHeardAtJudgesByTheDevicesCapabilities(t *testing.T) {
	m := New(devices.Device{ID: "lamp", Class: devices.Light})
	m.Report(map[string]any{"state": "ON", "brightness": 2.0}, false, time.Unix(0, 0))
	target := devices.Target{"state": "ON", "brightness": 1.0}
	if _, ok := m.HeardAt(target); ok {
		t.Fatalf("brightness 1 heard as 2 without capabilities; want an exact match")
	}
	m.SetCapabilities(devices.NewCapabilities("LED1545G12", "IKEA", "", []devices.Property{
		{Name: "state", Kind: devices.KindBinary, Access: 7, ValueOn: "ON", ValueOff: "OFF"},
		{Name: "brightness", Kind: devices.KindNumeric, Access: 7, Min: 0, Max: 254, HasMin: true, HasMax: true},
	}))
	if _, ok := m.HeardAt(target); !ok {
		t.Errorf("brightness 1 not heard as 2 with the bulb's capabilities (step 1)")
	}
}
