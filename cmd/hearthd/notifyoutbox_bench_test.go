package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/protocols/webhook"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// BenchmarkNotificationDelivered measures one notification from Notify
// to its webhook service's 200, one at a time, on a real store in the
// test's temp dir and a real HTTP service (httptest): "stored" keeps it
// in the outbox (saved before it is queued, deleted once delivered: two
// synced commits), "memory" is the queue alone, as before the outbox.
// The difference is the outbox's cost per notification.
func BenchmarkNotificationDelivered(b *testing.B) {
	for _, c := range []struct {
		name   string
		stored bool
	}{{"memory", false}, {"stored", true}} {
		b.Run(c.name, func(b *testing.B) {
			var got atomic.Uint64
			taken := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			st, err := store.Open(b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			sender, err := webhook.New(webhook.Options{URL: srv.URL})
			if err != nil {
				b.Fatal(err)
			}
			opts := dispatcher.Options{
				Services: []dispatcher.Service{{Name: "alerts", Notifier: notifierFunc(func(ctx context.Context, p []byte) error {
					err := sender.Notify(ctx, p)
					got.Add(1)
					taken <- struct{}{}
					return err
				}), Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 10 * time.Second}}},
				Journal: st, Publisher: discardPublisher{},
			}
			if c.stored {
				opts.NotifyOutbox = st
			}
			d, err := dispatcher.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			n := notify.Notification{Title: "front_door: unlock failed", Message: "m", Severity: "critical", Source: "bench", Device: "front_door"}
			for b.Loop() {
				d.Notify(n)
				<-taken
			}
			// A notifier deletes a delivered notification before it
			// takes the next: once Run returns, every delete is done.
			b.StopTimer()
			cancel()
			<-done
			if ns, err := st.Notifications(); err != nil || len(ns) != 0 {
				b.Fatalf("outbox after the run: %d entries (%v), want none", len(ns), err)
			}
			if got.Load() != uint64(b.N) {
				b.Fatalf("%d delivered, want %d", got.Load(), b.N)
			}
		})
	}
}

// notifierFunc is a notify.Notifier of a function.
type notifierFunc func(ctx context.Context, payload []byte) error

func (f notifierFunc) Notify(ctx context.Context, payload []byte) error { return f(ctx, payload) }
