package service

import (
	"slices"
	"testing"
	"time"

	"github.com/hearthd/hearth/breaker"
)

// permits returns n permits of a closed breaker.
func permits(t *testing.T, n int) []*breaker.Permit {
	t.Helper()
	b := breaker.New(breaker.Options{FailureThreshold: 1000, OpenFor: func(int) time.Duration { return time.Minute }})
	var ps []*breaker.Permit
	for range n {
		p, err := b.Allow(t0)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// One witness read is out at a time: the first timeout asks the witness
// last heard from first, never a suspect; a second timeout meanwhile
// waits for the same answer; a live report closes News.
func TestOneWitnessReadDecidesEveryTimeoutWhileItIsOut(t *testing.T) {
	var s Silence[string]
	for _, w := range []string{"bulb1", "bulb2", "plug"} {
		s.AddWitness(w)
	}
	s.HeardFrom("plug")
	ps := permits(t, 2)
	fail, ask := s.TimedOut(ps[0], "bulb1", 7)
	if fail || ask == nil {
		t.Fatalf("first timeout: fail %v, ask %v; want a witness read", fail, ask)
	}
	if want := []string{"plug", "bulb2"}; !slices.Equal(ask.Candidates, want) {
		t.Errorf("candidates %v, want %v: the one last heard from first, never the suspect", ask.Candidates, want)
	}
	if fail, again := s.TimedOut(ps[1], "bulb2", 7); fail || again != nil {
		t.Fatalf("second timeout while the read is out: fail %v, ask %v; want it to wait for the same answer", fail, again)
	}
	s.HeardFrom("bulb2")
	select {
	case <-ask.News:
	default:
		t.Fatal("a live report did not close News")
	}
	if n := s.Waiting(); n != 2 {
		t.Errorf("Waiting() = %d with the read out, want 2", n)
	}
	if n := ask.Answer(breaker.Ignored, t0); n != 2 {
		t.Errorf("Answer decided %d attempts, want 2", n)
	}
	if n := s.Waiting(); n != 0 {
		t.Errorf("Waiting() = %d once answered, want 0", n)
	}
}

// A read that found the service silent makes the next timeouts fail at
// once, without a read, until the service is heard from again.
func TestSilentServiceFailsAtOnceUntilHeardFromAgain(t *testing.T) {
	var s Silence[string]
	s.AddWitness("bulb1")
	s.AddWitness("bulb2")
	ps := permits(t, 3)
	_, ask := s.TimedOut(ps[0], "bulb1", 3)
	ask.Answer(breaker.Failure, t0)
	if fail, ask := s.TimedOut(ps[1], "bulb1", 3); !fail || ask != nil {
		t.Fatalf("timeout after a silent read, nothing heard since: fail %v, ask %v; want fail at once", fail, ask)
	}
	if fail, ask := s.TimedOut(ps[2], "bulb1", 4); fail || ask == nil {
		t.Fatalf("timeout after the service was heard (count moved): fail %v, ask %v; want a new read", fail, ask)
	}
}

// A service with no other witness than the suspect fails its timeout at
// once: nothing can speak for the bridge.
func TestNoWitnessMeansFailure(t *testing.T) {
	var s Silence[string]
	s.AddWitness("bulb1")
	ps := permits(t, 1)
	if fail, ask := s.TimedOut(ps[0], "bulb1", 0); !fail || ask != nil {
		t.Fatalf("the suspect is the only witness: fail %v, ask %v; want fail at once", fail, ask)
	}
}
