package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options.OnDamage hears every read, prune and commit of the open Store
// that finds damage, with the error the call returns, so that hearthd
// can say so at once rather than at the next start.
func TestOnDamageHearsDamageFoundByReadsPrunesAndCommits(t *testing.T) {
	var mu sync.Mutex
	var heard []error
	s, err := Open(t.TempDir(), Options{OnDamage: func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	victim := newOp("victim")
	if err := s.Save(victim, newOp("other")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Lookup("victim"); err != nil {
		t.Fatal(err)
	}
	take := func() []error {
		mu.Lock()
		defer mu.Unlock()
		h := heard
		heard = nil
		return h
	}
	if h := take(); len(h) != 0 {
		t.Fatalf("heard %v before any damage", h)
	}
	damageLive(t, s, "victim")

	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Lookup", func() error { _, _, err := s.Lookup("victim"); return err }},
		{"Pending", func() error { _, err := s.Pending(); return err }},
		{"PruneTerminal", func() error { _, err := s.PruneTerminal(t0.Add(time.Hour)); return err }},
		{"Save", func() error { return s.Save(victim) }},
	} {
		err := c.call()
		h := take()
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), `op "victim"`) {
			t.Errorf("%s = %v; want ErrDamaged naming op \"victim\"", c.name, err)
		}
		if len(h) != 1 || h[0].Error() != err.Error() {
			t.Errorf("%s: OnDamage heard %v; want once, the error %v", c.name, h, err)
		}
	}
	// A read that finds nothing wrong is not reported.
	if _, _, err := s.Lookup("other"); err != nil {
		t.Fatal(err)
	}
	if h := take(); len(h) != 0 {
		t.Errorf("heard %v after a sound read", h)
	}
}
