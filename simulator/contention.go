package simulator

// The contention study: a discrete-event simulation, in virtual time, of
// many clients updating one optimistically locked row, after the simulator
// behind "Exponential Backoff And Jitter" (Marc Brooker, AWS Architecture
// Blog, 2015). It never sleeps and starts no goroutines.

import (
	"container/heap"
	"math"
	"time"
)

// Network delay of every message in a contention run unless
// Contention.NetMean and Contention.NetStdDev say otherwise: |Normal(10 ms,
// 2 ms)|, as in the AWS post ("mean of 10ms and variance of 4ms").
const (
	DefaultNetMean   = 10 * time.Millisecond
	DefaultNetStdDev = 2 * time.Millisecond
)

// Rand is the random source of a contention run. It draws the network
// delays and is handed to the Backoff to draw jitter from, so one seed
// reproduces a whole run. *math/rand/v2.Rand satisfies it.
type Rand interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
	// NormFloat64 returns a standard normal value (mean 0, deviation 1).
	NormFloat64() float64
}

// Backoff returns how long a client waits before its retry n (n = 1 is the
// retry after its first failed write). prev is the delay this client waited
// before its previous retry, 0 before the first; r is the run's random
// source. A negative delay counts as 0; a nil Backoff retries at once (no
// backoff).
//
// It is a function, not an interface that retry.Backoff would satisfy,
// because retry.Backoff.Delay takes a retry.Rand and this package may not
// import retry: the caller wraps it,
//
//	func(n int, prev time.Duration, r simulator.Rand) time.Duration { return b.Delay(n, prev, r) }
type Backoff func(n int, prev time.Duration, r Rand) time.Duration

// Contention is one run of the contention study: Clients clients each
// update one row once, under optimistic concurrency control.
//
// Every client starts at time 0 and loops: it reads the row's version,
// sends a conditional write carrying that version and waits for the reply.
// The server handles messages in arrival order; a write whose version is
// the row's current version succeeds and bumps the version, any other
// write fails. On success the client is done. On failure it waits
// Backoff(n, prev) for its n-th retry and starts over with a fresh read
// (the failure reply carries no version; the AWS post's simulator re-reads
// the same way). Every message, request or reply, read or write, takes
// |Normal(NetMean, NetStdDev)|.
//
// Progress is certain whatever the backoff: a write fails only if another
// client's write succeeded between its read and its arrival, so the k-th
// client to succeed failed at most k−1 times and a run makes at most
// N(N+1)/2 writes for N clients.
type Contention struct {
	// Clients is the number of clients; 0 or less makes an empty run.
	Clients int
	// Backoff spaces each client's retries; nil retries at once.
	Backoff Backoff
	// NetMean and NetStdDev shape the network delay of every message;
	// 0 means DefaultNetMean and DefaultNetStdDev.
	NetMean, NetStdDev time.Duration
	// Rand draws network delays and jitter. Required.
	Rand Rand
}

// ContentionResult is what one contention run measured.
type ContentionResult struct {
	// Calls is the number of write attempts the server handled, successful
	// or not (reads are not counted, as in the AWS post).
	Calls int
	// Completion is the virtual time at which the last client received its
	// success reply.
	Completion time.Duration
	// Finished is the number of clients whose write succeeded; a run ends
	// only when every client has finished, so it equals Clients.
	Finished int
	// Version is the row's version at the end: the number of successful
	// writes, which equals Finished unless the server lost an update.
	Version int
}

// Event kinds: where a message arrives.
const (
	readAtServer  = iota // a client's read request
	readAtClient         // the server's read reply, carrying the version
	writeAtServer        // a client's conditional write, carrying the version it read
	writeAtClient        // the server's write reply, carrying success
)

// contentionEvent is one message arriving at time at. seq breaks ties in the order
// the messages were sent, so a run depends on its seed alone.
type contentionEvent struct {
	at      time.Duration
	seq     uint64
	client  int
	kind    uint8
	version int  // readAtClient, writeAtServer
	ok      bool // writeAtClient
}

// eventQueue is a min-heap of events by (at, seq), for container/heap.
type eventQueue []contentionEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(contentionEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// contender is one client's retry state.
type contender struct {
	retries int           // failed writes so far
	prev    time.Duration // delay before the latest retry, 0 before the first
}

// Run simulates c and returns what it measured. It is deterministic: the
// same Contention with a random source in the same state gives the same
// result. It panics if Rand is nil and Clients is above 0.
func (c Contention) Run() ContentionResult {
	var res ContentionResult
	if c.Clients <= 0 {
		return res
	}
	mean, sd := c.NetMean, c.NetStdDev
	if mean == 0 {
		mean = DefaultNetMean
	}
	if sd == 0 {
		sd = DefaultNetStdDev
	}
	net := func() time.Duration {
		// The conversion rounds the product, so that no platform fuses
		// it with the sum into one FMA that rounds differently.
		return time.Duration(math.Abs(float64(c.Rand.NormFloat64()*float64(sd)) + float64(mean)))
	}

	clients := make([]contender, c.Clients)
	q := make(eventQueue, 0, c.Clients)
	var seq uint64
	send := func(e contentionEvent) {
		e.seq = seq
		seq++
		heap.Push(&q, e)
	}
	for i := range clients {
		send(contentionEvent{at: net(), client: i, kind: readAtServer})
	}
	version := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(contentionEvent)
		now := e.at
		switch e.kind {
		case readAtServer:
			send(contentionEvent{at: later(now, net()), client: e.client, kind: readAtClient, version: version})
		case readAtClient:
			send(contentionEvent{at: later(now, net()), client: e.client, kind: writeAtServer, version: e.version})
		case writeAtServer:
			res.Calls++
			ok := e.version == version
			if ok {
				version++
			}
			send(contentionEvent{at: later(now, net()), client: e.client, kind: writeAtClient, ok: ok})
		case writeAtClient:
			if e.ok {
				res.Finished++
				res.Completion = now
				continue
			}
			cl := &clients[e.client]
			cl.retries++
			var wait time.Duration
			if c.Backoff != nil {
				wait = max(c.Backoff(cl.retries, cl.prev, c.Rand), 0)
			}
			cl.prev = wait
			send(contentionEvent{at: later(later(now, wait), net()), client: e.client, kind: readAtServer})
		}
	}
	res.Version = version
	return res
}

// later is t+d, saturating at the largest time.Duration; d ≥ 0.
func later(t, d time.Duration) time.Duration {
	if d > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + d
}
