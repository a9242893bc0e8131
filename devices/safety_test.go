package devices

import "testing"

func TestRisky(t *testing.T) {
	lock := Device{ID: "front_door", Class: Lock}
	garage := Device{ID: "garage", Class: Cover, Safety: SafetyCritical}
	blinds := Device{ID: "blinds", Class: Cover}
	valve := Device{ID: "water", Class: Valve}
	alarm := Device{ID: "alarm", Class: Alarm}
	light := Device{ID: "hall", Class: Light, Safety: SafetyCritical}
	tests := []struct {
		name   string
		dev    Device
		target Target
		want   bool
	}{
		{"lock UNLOCK", lock, Target{"state": "UNLOCK"}, true},
		{"lock LOCK (safe direction)", lock, Target{"state": "LOCK"}, false},
		{"garage OPEN", garage, Target{"state": "OPEN"}, true},
		{"garage position 40 (opening)", garage, Target{"position": 40.0}, true},
		{"garage position 0 (closing)", garage, Target{"position": 0.0}, false},
		{"garage CLOSE (safe direction)", garage, Target{"state": "CLOSE"}, false},
		{"garage STOP", garage, Target{"state": "STOP"}, false},
		{"cover without safety: OPEN", blinds, Target{"state": "OPEN"}, false},
		{"valve OPEN", valve, Target{"state": "OPEN"}, true},
		{"valve ON", valve, Target{"state": "ON"}, true},
		{"valve CLOSE", valve, Target{"state": "CLOSE"}, false},
		{"alarm DISARM", alarm, Target{"state": "DISARM"}, true},
		{"alarm ARM_AWAY", alarm, Target{"state": "ARM_AWAY"}, false},
		{"light marked critical: no risky direction", light, Target{"state": "ON"}, false},
	}
	for _, tt := range tests {
		if got := Risky(tt.dev, tt.target); got != tt.want {
			t.Errorf("%s: Risky = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDeviceSafetyCritical(t *testing.T) {
	tests := []struct {
		dev  Device
		want bool
	}{
		{Device{Class: Lock}, true},
		{Device{Class: Cover}, false},
		{Device{Class: Cover, Safety: SafetyCritical}, true},
		{Device{Class: Light}, false},
	}
	for _, tt := range tests {
		if got := tt.dev.SafetyCritical(); got != tt.want {
			t.Errorf("%+v: SafetyCritical = %v, want %v", tt.dev, got, tt.want)
		}
	}
}

func TestAssess(t *testing.T) {
	unlock := Target{"state": "UNLOCK"}
	open := Target{"state": "OPEN"}
	tests := []struct {
		name   string
		class  Class
		target Target
		state  map[string]any
		want   Reading
	}{
		{"lock_state locked", Lock, unlock, map[string]any{"state": "LOCK", "lock_state": "locked"}, ReadingKnown},
		{"lock_state unlocked", Lock, unlock, map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, ReadingKnown},
		{"lock_state jammed", Lock, unlock, map[string]any{"state": "UNLOCK", "lock_state": "jammed"}, ReadingInvalid},
		{"lock_state not_fully_locked", Lock, unlock, map[string]any{"state": "UNLOCK", "lock_state": "not_fully_locked"}, ReadingInvalid},
		{"lock_state null", Lock, unlock, map[string]any{"state": "LOCK", "lock_state": nil}, ReadingInvalid},
		{"lock without lock_state: an echo reads nothing", Lock, unlock, map[string]any{"state": "LOCK"}, ReadingNone},
		{"lock state garbage without lock_state", Lock, unlock, map[string]any{"state": "MAYBE"}, ReadingNone},
		{"lock battery only", Lock, unlock, map[string]any{"battery": 90.0}, ReadingNone},
		{"cover position", Cover, open, map[string]any{"state": "CLOSE", "position": 0.0}, ReadingKnown},
		{"cover position null", Cover, open, map[string]any{"state": "CLOSE", "position": nil}, ReadingInvalid},
		{"cover state only", Cover, open, map[string]any{"state": "CLOSE"}, ReadingKnown},
		{"cover nothing", Cover, open, map[string]any{"linkquality": 80.0}, ReadingNone},
		{"cover position target", Cover, Target{"position": 40.0}, map[string]any{"position": 10.0}, ReadingKnown},
		{"cover two attributes, one reported", Cover, Target{"state": "OPEN", "tilt": 50.0}, map[string]any{"position": 10.0}, ReadingNone},
	}
	for _, tt := range tests {
		if got := Assess(tt.class, tt.target, tt.state); got != tt.want {
			t.Errorf("%s: Assess = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		class Class
		state map[string]any
		want  bool
	}{
		{"jammed", Lock, map[string]any{"state": "UNLOCK", "lock_state": "jammed"}, true},
		{"not fully locked", Lock, map[string]any{"state": "UNLOCK", "lock_state": "not_fully_locked"}, true},
		{"error", Lock, map[string]any{"lock_state": "ERROR"}, true},
		{"locked", Lock, map[string]any{"state": "LOCK", "lock_state": "locked"}, false},
		{"no lock_state", Lock, map[string]any{"state": "UNLOCK"}, false},
		{"a cover is never jammed by lock_state", Cover, map[string]any{"lock_state": "jammed"}, false},
	} {
		if _, got := Fault(tc.class, tc.state); got != tc.want {
			t.Errorf("%s: Fault = %v, want %v", tc.name, got, tc.want)
		}
	}
}
