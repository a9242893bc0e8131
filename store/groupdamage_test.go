package store

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// damageLive changes one byte of the live record of op id in the open
// store s's file, as a bad write at rest would: through the file, which
// bbolt's shared mapping shows at once.
func damageLive(t *testing.T, s *Store, id string) {
	t.Helper()
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(b, []byte(`"op_id":"`+id+`","device":"hall_light"`))
	if i < 0 {
		t.Fatalf("no record of %s in the file", id)
	}
	f, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := int64(i + len(`"op_id":"`+id+`","device":"hall_`))
	if _, err := f.WriteAt([]byte("X"), at); err != nil {
		t.Fatal(err)
	}
}

// A request whose op's stored record is damaged fails alone: the other
// requests of its group commit are committed, and the commit is reported
// as the success it is (OnCommit(nil)), not as a failing disk.
func TestDamagedRecordFailsOnlyItsOwnRequestInAGroupCommit(t *testing.T) {
	var mu sync.Mutex
	var commits []error
	held, release := make(chan struct{}), make(chan struct{})
	var hold bool
	queued := make(chan int, 16)
	s, err := open(t.TempDir(), Options{OnCommit: func(err error) { mu.Lock(); commits = append(commits, err); mu.Unlock() }},
		hooks{
			beforeCommit: func(int) {
				if hold {
					hold = false
					close(held)
					<-release
				}
			},
			queued: func(n int) { queued <- n },
		})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	victim := newOp("victim")
	if err := s.Save(victim, newOp("bystander")); err != nil {
		t.Fatal(err)
	}
	<-queued
	damageLive(t, s, "victim")

	hold = true // the writer is idle: its next turn reads it
	go func() { _ = s.Save(newOp("blocker")) }()
	<-held
	<-queued
	victim.Status, victim.Attempts = devices.Queued, 1
	bystander := newOp("bystander")
	bystander.Status = devices.Succeeded
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, op := range []devices.Op{victim, newOp("innocent"), bystander} {
		wg.Go(func() { errs[i] = s.Save(op) })
		if n := <-queued; n != i+1 {
			t.Fatalf("queue length %d, want %d", n, i+1)
		}
	}
	close(release)
	wg.Wait()

	if !errors.Is(errs[0], ErrDamaged) || !strings.Contains(errs[0].Error(), `op "victim": record fails its checksum`) {
		t.Errorf("Save(victim) = %v; want ErrDamaged naming op \"victim\"", errs[0])
	}
	if errs[1] != nil || errs[2] != nil {
		t.Errorf("Save(innocent), Save(bystander) = %v, %v; want both committed", errs[1], errs[2])
	}
	if _, ok, err := s.Lookup("innocent"); !ok || err != nil {
		t.Errorf("Lookup(innocent) = %v, %v; want it stored", ok, err)
	}
	if op, _, err := s.Lookup("bystander"); err != nil || op.Status != devices.Succeeded {
		t.Errorf("Lookup(bystander) = %s, %v; want succeeded", op.Status, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(commits) != 3 || commits[0] != nil || commits[1] != nil || commits[2] != nil {
		t.Errorf("OnCommit saw %v; want three nil commits", commits)
	}
}
