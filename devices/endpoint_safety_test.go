package devices

import "testing"

// A safety-critical device's endpoint properties ("state_l1" of a double
// lock, "position_left" of a garage door's dual module) are refused: the
// unlock guards (Risky, Action, the lock_state confirmation) read the
// device's own state and position, and an endpoint's would pass them by.
// A device that is not safety-critical keeps its endpoints.
func TestSafetyCriticalDevicesEndpointsAreRefused(t *testing.T) {
	lockCaps := NewCapabilities("X", "Y", "double lock", []Property{
		{Name: "state_l1", Base: "state", Endpoint: "l1", Kind: KindBinary, Access: AccessPublished | AccessSet, ValueOn: "LOCK", ValueOff: "UNLOCK"},
		{Name: "lock_state_l1", Base: "lock_state", Endpoint: "l1", Kind: KindEnum, Access: AccessPublished, Values: []string{"locked", "unlocked"}},
	})
	coverCaps := NewCapabilities("TS130F_dual", "Tuya", "double cover", []Property{
		{Name: "position_left", Base: "position", Endpoint: "left", Kind: KindNumeric, Access: AccessPublished | AccessSet, Min: 0, Max: 100, HasMin: true, HasMax: true},
	})
	for _, tc := range []struct {
		dev    Device
		caps   *Capabilities
		raw    map[string]any
		refuse bool
	}{
		{Device{ID: "front_door", Class: Lock}, lockCaps, map[string]any{"state_l1": "UNLOCK"}, true},
		{Device{ID: "garage", Class: Cover, Safety: SafetyCritical}, coverCaps, map[string]any{"position_left": 100.0}, true},
		{Device{ID: "blinds", Class: Cover}, coverCaps, map[string]any{"position_left": 100.0}, false},
	} {
		target, err := ValidateFor(tc.dev.Class, tc.caps, tc.raw)
		if err != nil {
			t.Fatalf("%s %v: ValidateFor = %v", tc.dev.ID, tc.raw, err)
		}
		err = SafeEndpoints(tc.dev, tc.caps, target)
		if tc.refuse && ReasonOf(err) != ReasonUnsupported {
			t.Errorf("%s %v: SafeEndpoints = %v; want unsupported", tc.dev.ID, tc.raw, err)
		}
		if !tc.refuse && err != nil {
			t.Errorf("%s %v: SafeEndpoints = %v; want nil (not safety-critical)", tc.dev.ID, tc.raw, err)
		}
	}
}
