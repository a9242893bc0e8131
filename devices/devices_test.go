package devices

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseClass(t *testing.T) {
	for _, c := range Classes {
		got, err := ParseClass(string(c))
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %q, %v; want %q, nil", c, got, err, c)
		}
	}
	for _, s := range []string{"", "Light", "LIGHT", " light", "lights", "thermostat"} {
		got, err := ParseClass(s)
		if err == nil {
			t.Errorf("ParseClass(%q) = %q, nil; want an error", s, got)
			continue
		}
		if got != "" {
			t.Errorf("ParseClass(%q) returned class %q with its error", s, got)
		}
		want := `unknown class "` + s + `" (known: light, switch, lock, cover, climate, valve, alarm, sensor)`
		if err.Error() != want {
			t.Errorf("ParseClass(%q) error = %q, want %q", s, err, want)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id     string
		wantOK bool
	}{
		{"kitchen_light", true},
		{"front door", true},
		{"Küche-Licht", true},
		{"$lamp", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("é", 32), true}, // 64 bytes
		{strings.Repeat("x", 65), false},
		{strings.Repeat("é", 32) + "x", false}, // 65 bytes
		{"", false},
		{"bridge", false},
		{"services", false},
		{"notifications", false},
		{"Bridge", true}, // reserved names are exact
		{"a/b", false},
		{"a+b", false},
		{"a#", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\x7f", false},
	}
	for _, tc := range tests {
		err := ValidID(tc.id)
		if got := err == nil; got != tc.wantOK {
			t.Errorf("ValidID(%q) = %v, want ok=%v", tc.id, err, tc.wantOK)
		}
	}
}

// An MQTT topic must be well-formed UTF-8 (MQTT 5.0 §1.5.4), so an ID that
// is not cannot stand in hearth/<device>/set.
func TestValidIDRejectsInvalidUTF8(t *testing.T) {
	for _, id := range []string{"lamp\xff", "\xc3"} {
		if err := ValidID(id); err == nil {
			t.Errorf("ValidID(%q) = nil, want an error", id)
		}
	}
}

func TestStatusTerminal(t *testing.T) {
	tests := []struct {
		s    Status
		want bool
	}{
		{Accepted, false},
		{Queued, false},
		{Succeeded, true},
		{Failed, true},
		{Expired, true},
		{Superseded, true},
		{Rejected, true},
		{Status(""), false},
		{Status("SUCCEEDED"), false},
		{Status("done"), false},
	}
	for _, tc := range tests {
		if got := tc.s.Terminal(); got != tc.want {
			t.Errorf("Status(%q).Terminal() = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestOpResult(t *testing.T) {
	accepted := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	updated := accepted.Add(3 * time.Second)
	op := Op{
		OpID:       "op-1",
		Device:     "front_door",
		Target:     Target{"state": "LOCK"},
		Seq:        7,
		AcceptedAt: accepted,
		IssuedAt:   accepted.Add(-time.Second),
		Deadline:   accepted.Add(time.Minute),
		Status:     Failed,
		Reason:     ReasonTimeout,
		Detail:     "no report",
		Attempts:   2,
		LastSentAt: accepted.Add(2 * time.Second),
		State:      map[string]any{"state": "UNLOCK"},
		UpdatedAt:  updated,
	}
	want := Result{
		OpID:     "op-1",
		Device:   "front_door",
		Status:   Failed,
		Reason:   ReasonTimeout,
		Detail:   "no report",
		Attempts: 2,
		Target:   Target{"state": "LOCK"},
		State:    map[string]any{"state": "UNLOCK"},
		At:       updated,
	}
	if got := op.Result(); !reflect.DeepEqual(got, want) {
		t.Errorf("Op.Result() = %+v, want %+v", got, want)
	}
}

// The result message's JSON field names are the external contract of
// DESIGN.md: op_id, device, status, reason, detail, attempts, target, state, at.
func TestResultJSONFieldNames(t *testing.T) {
	at := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"full", Result{OpID: "op-1", Device: "lamp", Status: Succeeded, Reason: ReasonTimeout, Detail: "d", Attempts: 1,
			Target: Target{"state": "ON"}, State: map[string]any{"state": "ON"}, At: at},
			`{"op_id":"op-1","device":"lamp","status":"succeeded","reason":"timeout","detail":"d","attempts":1,"target":{"state":"ON"},"state":{"state":"ON"},"at":"2026-11-29T19:00:00Z"}`},
		{"empty optional fields are left out", Result{OpID: "op-2", Device: "lamp", Status: Accepted, At: at},
			`{"op_id":"op-2","device":"lamp","status":"accepted","attempts":0,"at":"2026-11-29T19:00:00Z"}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); got != tc.want {
			t.Errorf("%s: json = %s, want %s", tc.name, got, tc.want)
		}
	}
}
