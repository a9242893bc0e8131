package service

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)

// An unknown link holds commands for BridgeStateGrace, then lets them out
// as if the bridge were up; a down link holds them until the bridge says
// online.
func TestUnknownLinkIsTakenAsUpAfterTheGrace(t *testing.T) {
	l := NewLink(t0)
	ok, changed, retry := l.Ready(t0.Add(BridgeStateGrace - time.Nanosecond))
	if ok || changed == nil || !retry.Equal(t0.Add(BridgeStateGrace)) {
		t.Fatalf("within the grace: Ready = %v, %v, %v; want not ready, a channel, retry at the grace's end", ok, changed, retry)
	}
	if ok, _, _ := l.Ready(t0.Add(BridgeStateGrace)); !ok {
		t.Fatal("at the grace's end: not ready, want ready")
	}
	l.Set(false, t0.Add(time.Minute))
	ok, changed, retry = l.Ready(t0.Add(time.Hour))
	if ok || !retry.IsZero() {
		t.Fatalf("down: Ready = %v, retry %v; want not ready, no retry time", ok, retry)
	}
	l.Set(true, t0.Add(time.Hour))
	select {
	case <-changed:
	default:
		t.Fatal("the channel Ready handed out was not closed when the link came up")
	}
	if got := l.Current(); got != Up || got.String() != "online" {
		t.Errorf("Current() = %v, want online", got)
	}
}

// The generation tells an attempt that the link went down or was reset
// while it waited; an online after the grace, already taken as up, is no
// change for the attempts.
func TestGenerationCountsChangesThatMatterToAnAttempt(t *testing.T) {
	l := NewLink(t0)
	_, gen := l.Watch()
	l.Set(true, t0.Add(BridgeStateGrace))
	if l.ChangedSince(gen) {
		t.Error("an online after the grace changed the generation; attempts under way would be resent for nothing")
	}
	l.Reset(t0.Add(time.Minute))
	if !l.ChangedSince(gen) {
		t.Error("a reset (a new session) did not change the generation")
	}
	_, gen = l.Watch()
	if l.Set(false, t0.Add(2*time.Minute)); !l.ChangedSince(gen) {
		t.Error("an offline did not change the generation")
	}
}
