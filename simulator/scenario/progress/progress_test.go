package progress

import (
	"bytes"
	"testing"
	"time"
)

func TestPhasesLineNamesTheScenarioAndTheWholeSecondsSinceItsStart(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	now := t0
	p := &Phases{w: &out, name: "outage", start: t0, now: func() time.Time { return now }}
	p.Printf("before the outage: %v of traffic", 30*time.Second)
	now = t0.Add(92*time.Second + 900*time.Millisecond)
	p.Printf("outage")
	want := "outage [   0s] before the outage: 30s of traffic\noutage [1m32s] outage\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestNilPhasesPrintNothing(t *testing.T) {
	var p *Phases
	p.Printf("never %d", 1) // must not panic
}
