package devices

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestDeadLetterJSONHasItsSeqFirstAndTheOpsSeqAsOpSeq(t *testing.T) {
	at := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	d := DeadLetter{Seq: 3, Op: Op{
		OpID:       "op-1",
		Device:     "thermostat",
		Target:     Target{"occupied_heating_setpoint": float64(21)},
		Seq:        17,
		AcceptedAt: at,
		Deadline:   at.Add(time.Hour),
		Status:     Expired,
		Reason:     ReasonTTLElapsed,
		Attempts:   0,
		UpdatedAt:  at.Add(time.Hour),
	}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":3,"op_id":"op-1","device":"thermostat","target":{"occupied_heating_setpoint":21},` +
		`"accepted_at":"2026-11-29T19:00:00Z","deadline":"2026-11-29T20:00:00Z","status":"expired","reason":"ttl_elapsed",` +
		`"attempts":0,"updated_at":"2026-11-29T20:00:00Z","op_seq":17}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	var got DeadLetter
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Errorf("round trip\n%+v\nwant\n%+v", got, d)
	}
	if err := json.Unmarshal([]byte(`{"seq":"x"}`), &got); err == nil {
		t.Errorf("Unmarshal of a string seq: nil error, want one")
	}
}
