package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// slowToStopNotifier takes its first call until ctx is done, says so on
// stopping, then returns only once release is closed: a notify service
// whose POST takes a moment to unwind at shutdown, which Run waits for.
type slowToStopNotifier struct {
	called, stopping, release chan struct{}
}

func (n *slowToStopNotifier) Notify(ctx context.Context, _ []byte) error {
	close(n.called)
	<-ctx.Done()
	close(n.stopping)
	<-n.release
	return ctx.Err()
}

// goroutineRunning reports whether a goroutine's stack names fn.
func goroutineRunning(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// A notification raised while Run is stopping (after its context is
// cancelled, before it returns: an UNLOCK refused by the intake's last
// batch, a worker's last end) is stored, and is in the outbox at the
// next start. It was neither stored nor sent: the notify saver had
// stopped with the context, and the notify workers too.
func TestNotificationRaisedWhileStoppingIsStored(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowToStopNotifier{called: make(chan struct{}), stopping: make(chan struct{}), release: make(chan struct{})}
	d, err := dispatcher.New(dispatcher.Options{
		Services: []dispatcher.Service{{Name: "alerts", Notifier: slow,
			Policy: retry.Policy{MaxAttempts: 3, AttemptTimeout: 10 * time.Second,
				Backoff: retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: time.Minute}}}},
		Journal: st, Publisher: discardPublisher{}, NotifyOutbox: st,
		Clock: clockwork.NewFakeClockAt(t0), Rand: ceilingRand{}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	d.Notify(note("n1"))
	<-slow.called
	const saver = "notify.(*Queues).runSaver"
	if !goroutineRunning(saver) {
		t.Fatalf("no goroutine %s: the wait below would wait for nothing", saver)
	}
	cancel()
	<-slow.stopping
	deadline := time.Now().Add(eventWait)
	for goroutineRunning(saver) {
		if time.Now().After(deadline) {
			t.Fatal("the notify saver did not stop with Run's context")
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.Notify(note("n2")) // Run has not returned: the notifier holds it
	close(slow.release)
	<-done
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ns, err := st.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	if fmt.Sprint(ids) != "[n1 n2]" {
		t.Fatalf("outbox after the stop = %v, want [n1 n2]", ids)
	}
}
