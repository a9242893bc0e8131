package dispatcher

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// A risky action on a sleepy device (a battery lock asked to unlock)
// reaches it at most MaxRiskyAttempts times in all, not twice per awake
// lease: a lock that answers every read "still locked" and checks in
// once a minute gets two sets of the unlock, then the command ends
// failed, long before its TTL.
func TestSleepyRiskyActionIsSentAtMostTwice(t *testing.T) {
	r := startSleepy(t, sleepyOptions{class: devices.Lock})
	sets, end := r.unlockStillLocked()
	if sets != MaxRiskyAttempts {
		t.Errorf("the unlock reached the lock %d times; want %d (MaxRiskyAttempts), whatever the leases", sets, MaxRiskyAttempts)
	}
	if end.Status != devices.Failed {
		t.Errorf("the unlock ended %q/%s; want failed once its sends were spent, before its TTL (10 min)", end.Status, end.Reason)
	}
}

// unlockStillLocked sends the battery lock (the rig's radiator as a
// sleepy lock) an unlock with a 10 min TTL, answers every set and read
// "still locked", and has the lock check in once a minute, moving the
// clock a second whenever the dispatcher is idle. It returns how many
// sets reached the lock and the unlock's end (zero if none within the
// TTL).
func (r *sleepyRig) unlockStillLocked() (sets int, end devices.Result) {
	issued := r.clock.Now().UTC().Format(time.RFC3339)
	r.submit(`{"state":"UNLOCK","op_id":"unlock","ttl":"10m","issued_at":"` + issued + `"}`)
	locked := map[string]any{"state": "LOCK", "lock_state": "locked"}
	start := r.clock.Now()
	for end.OpID == "" && r.clock.Since(start) < 10*time.Minute {
		select {
		case m := <-r.bridge.msgs:
			if m.verb == "set" {
				sets++
			}
			r.report(locked) // every set and read is answered: still locked
		case res := <-r.results:
			if res.OpID == "unlock" && res.Status.Terminal() {
				end = res
			}
		case <-time.After(30 * time.Millisecond): // idle: time moves on
			r.clock.Advance(time.Second)
			if r.clock.Since(start)%time.Minute == 0 {
				r.report(locked) // the lock's check-in: a lease begins
			}
		}
	}
	return sets, end
}

// revocable allows everything until revoked.
type revocable struct{ revoked atomic.Bool }

func (a *revocable) Authorize(string, devices.Device, devices.Target) error {
	if a.revoked.Load() {
		return errors.New("the tablet may no longer unlock the door")
	}
	return nil
}

// A permission revoked while a battery lock is read at its wake, before
// an UNLOCK, stops the UNLOCK as it does on a lock that always listens:
// it fails unauthorized after 0 attempts, and no set reaches the lock.
func TestSleepyUnlockStopsWhenThePermissionIsRevokedDuringTheRead(t *testing.T) {
	authz := &revocable{}
	r := startSleepy(t, sleepyOptions{class: devices.Lock, authz: authz})
	locked := map[string]any{"state": "LOCK", "lock_state": "locked"}
	r.submit(`{"state":"UNLOCK","op_id":"unlock","ttl":"10m"}`)
	r.status("unlock", devices.Queued) // asleep
	r.report(locked)                   // the lock checks in: a lease begins
	if m := r.next(); m.verb != "get" {
		t.Fatalf("at the wake: a %s %v; want the fresh read before the unlock", m.verb, m.target)
	}
	authz.revoked.Store(true) // while the read is out
	r.report(locked)          // the read's answer
	end := r.await("the unlock's end", func(res devices.Result) bool { return res.OpID == "unlock" && res.Status.Terminal() })
	if end.Status != devices.Failed || end.Reason != devices.ReasonUnauthorized || end.Attempts != 0 {
		t.Errorf("unlock: %s/%s after %d attempts (%s); want failed/unauthorized after 0", end.Status, end.Reason, end.Attempts, end.Detail)
	}
	r.none("after the permission was revoked")
}
