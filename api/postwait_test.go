package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// postAsync runs a POST in the background and returns its answer's
// channel.
func (f *fixture) postAsync(path, body string) <-chan response {
	ch := make(chan response, 1)
	go func() { ch <- f.doContext(context.Background(), "POST", path, tabletToken, body) }()
	return ch
}

// POST ?wait= answers 200 with the terminal result once the command
// ends within the wait.
func TestPostWaitAnswersTheEnd(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	ch := f.postAsync("/api/v1/devices/front_door/commands?wait=30s", `{"state":"UNLOCK","op_id":"pw-1"}`)
	f.blockUntilWaiting()
	op, found, err := f.store.Lookup("pw-1")
	if err != nil || !found {
		t.Fatalf("pw-1 not stored: %v", err)
	}
	done := succeeded(op)
	f.save(done)
	f.waiter.Notify(done.Result())
	r := f.answer(ch)
	if res := r.result(t); r.status != http.StatusOK || res.Status != devices.Succeeded || res.OpID != "pw-1" || res.State["state"] != "UNLOCK" {
		t.Errorf("%d %s; want 200 succeeded", r.status, r.body)
	}
	if got := r.header.Get("Location"); got != "/api/v1/ops/pw-1" {
		t.Errorf("Location %q", got)
	}
	if n := f.waiter.waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

// A command still under way when the wait passes is answered 202 with
// its latest stored result.
func TestPostWaitPasses(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	ch := f.postAsync("/api/v1/devices/hall_light/commands?wait=2s", `{"state":"ON","op_id":"pw-2"}`)
	f.blockUntilWaiting()
	f.clock.Advance(2 * time.Second)
	r := f.answer(ch)
	if res := r.result(t); r.status != http.StatusAccepted || res.Status != devices.Accepted || res.OpID != "pw-2" {
		t.Errorf("%d %s; want 202 accepted", r.status, r.body)
	}
}

// A bad wait is refused before anything is submitted.
func TestPostBadWaitSubmitsNothing(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	r := f.do("POST", "/api/v1/devices/front_door/commands?wait=2m", tabletToken, "LOCK")
	if r.status != http.StatusBadRequest || r.body != `{"error":"invalid_wait","detail":"wait is \"2m\"; want a Go duration from 0s to 1m0s, such as 30s"}`+"\n" {
		t.Errorf("%d %s", r.status, r.body)
	}
	if n := len(f.received.all()); n != 0 {
		t.Errorf("%d commands submitted", n)
	}
}
