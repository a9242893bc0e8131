package devices

import "testing"

// A target on the device's own grid (21 °C, value_step 0.5) is
// not confirmed by the neighbouring grid value (21.5 °C): that is the
// setpoint the TRV had before, which any report after the set (a
// local_temperature report carrying Zigbee2MQTT's cached state, a
// read-back's answer) still shows. Rounding explains at most half a step.
func TestSatisfiedByRefusesTheNeighbouringStep(t *testing.T) {
	setpoint := NewCapabilities("TRVZB", "SONOFF", "TRV", []Property{
		{Name: "occupied_heating_setpoint", Kind: KindNumeric, Access: 7, Min: 4, Max: 35, HasMin: true, HasMax: true, Step: 0.5},
	})
	if SatisfiedBy(Climate, setpoint, Target{"occupied_heating_setpoint": 21.0}, map[string]any{"occupied_heating_setpoint": 21.5}) {
		t.Errorf("setpoint 21 (on the 0.5 grid) confirmed by a report of 21.5, another setting")
	}
	if SatisfiedBy(Climate, setpoint, Target{"occupied_heating_setpoint": 21.0}, map[string]any{"occupied_heating_setpoint": 20.5}) {
		t.Errorf("setpoint 21 confirmed by a report of 20.5, another setting")
	}
}

// A cover asked to close by position 0 is not closed at position
// 1: Zigbee2MQTT itself (and Hearth's own ha_state, coverShows) calls
// that open, even with the bridge's description known (position 0–100,
// no value_step).
func TestSatisfiedByDoesNotCallACoverAtOnePercentClosed(t *testing.T) {
	caps := NewCapabilities("TS130F", "Tuya", "cover", []Property{
		{Name: "position", Kind: KindNumeric, Access: 7, Min: 0, Max: 100, HasMin: true, HasMax: true, Unit: "%"},
	})
	if SatisfiedBy(Cover, caps, Target{"position": 0.0}, map[string]any{"position": 1.0}) {
		t.Errorf("position 0 (closed) confirmed by a report of position 1")
	}
}
