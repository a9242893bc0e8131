package api

import (
	"sync"

	"github.com/hearthd/hearth/devices"
)

// Waiter wakes the requests that wait for an op to end (GET
// /api/v1/ops/{op_id}?wait=). The dispatcher hands it every result it
// publishes (wire Notify to dispatcher.Options.OnResult); a waiting
// request then reads the op from the store again. It starts no goroutine:
// a request that stops waiting (its wait passed, or its client left) takes
// its channel out before it returns. The zero Waiter is ready to use.
type Waiter struct {
	mu   sync.Mutex
	byOp map[string]map[chan struct{}]struct{}
}

// Notify wakes every request waiting for r's op, if r is terminal. It
// never blocks: a request already woken and not yet back keeps one
// pending wake-up.
func (w *Waiter) Notify(r devices.Result) {
	if !r.Status.Terminal() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.byOp[r.OpID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch registers a wait for opID: the channel receives after each
// terminal result of opID from now on. The caller reads the op only after
// watch, so that a result between its read and its wait is not lost, and
// calls stop when done.
func (w *Waiter) watch(opID string) (wake <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.byOp == nil {
		w.byOp = map[string]map[chan struct{}]struct{}{}
	}
	if w.byOp[opID] == nil {
		w.byOp[opID] = map[chan struct{}]struct{}{}
	}
	w.byOp[opID][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.byOp[opID], ch)
		if len(w.byOp[opID]) == 0 {
			delete(w.byOp, opID)
		}
	}
}

// waiting returns how many requests wait, for tests.
func (w *Waiter) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, chans := range w.byOp {
		n += len(chans)
	}
	return n
}
