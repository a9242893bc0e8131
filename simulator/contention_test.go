package simulator

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The backoffs of the AWS post, written here from its formulas rather than
// taken from package retry, which the simulator may not import. The ceiling
// before retry n is min(cap, base·2^(n-1)).
const (
	testBase = 5 * time.Millisecond
	testCap  = 2 * time.Second
)

func ceiling(n int) time.Duration {
	if n > 20 {
		return testCap
	}
	return min(testCap, testBase<<(n-1))
}

func exponential(n int, _ time.Duration, _ Rand) time.Duration { return ceiling(n) }

func fullJitter(n int, _ time.Duration, r Rand) time.Duration {
	return time.Duration(r.Int64N(int64(ceiling(n)) + 1))
}

func equalJitter(n int, _ time.Duration, r Rand) time.Duration {
	t := ceiling(n)
	return t/2 + time.Duration(r.Int64N(int64(t/2)+1))
}

func decorrelatedJitter(_ int, prev time.Duration, r Rand) time.Duration {
	prev = max(prev, testBase)
	return min(testCap, testBase+time.Duration(r.Int64N(int64(3*prev-testBase)+1)))
}

var testBackoffs = []struct {
	name    string
	backoff Backoff
}{
	{"none", nil},
	{"exponential", exponential},
	{"full", fullJitter},
	{"equal", equalJitter},
	{"decorrelated", decorrelatedJitter},
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

func TestContentionSameSeedSameResult(t *testing.T) {
	for _, b := range testBackoffs {
		run := func(seed uint64) ContentionResult {
			return Contention{Clients: 40, Backoff: b.backoff, Rand: seeded(seed)}.Run()
		}
		first, again := run(7), run(7)
		if first != again {
			t.Errorf("%s: seed 7 gave %+v, then %+v", b.name, first, again)
		}
		if other := run(8); other.Completion == first.Completion {
			t.Errorf("%s: seeds 7 and 8 both completed at %v; the seed does not reach the network", b.name, first.Completion)
		}
	}
}

// A lone client reads, writes once and is done: four messages, one call.
func TestContentionOneClientWritesOnce(t *testing.T) {
	noRetry := func(int, time.Duration, Rand) time.Duration {
		t.Error("a lone client's write failed and it backed off")
		return 0
	}
	got := Contention{Clients: 1, Backoff: noRetry, NetMean: 10 * time.Millisecond, NetStdDev: 1, Rand: seeded(1)}.Run()
	if got.Calls != 1 || got.Finished != 1 || got.Version != 1 {
		t.Errorf("one client: %+v, want 1 call, 1 finished, version 1", got)
	}
	if d := got.Completion - 40*time.Millisecond; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("one client completed at %v, want 40ms: read, reply, write, reply at 10ms each", got.Completion)
	}
}

// One writer wins each round: a write fails only if another client's write
// succeeded between its read and its arrival, so the k-th client to finish
// failed at most k-1 times. Whatever the backoff, N clients make between N
// and N(N+1)/2 calls, and every client finishes.
func TestContentionEveryClientFinishesWithinTheRoundBound(t *testing.T) {
	for _, b := range testBackoffs {
		for _, n := range []int{2, 10, 50, 190} {
			got := Contention{Clients: n, Backoff: b.backoff, Rand: seeded(uint64(n))}.Run()
			if got.Finished != n || got.Version != n {
				t.Errorf("%s, %d clients: %d finished, version %d; want %d and %d", b.name, n, got.Finished, got.Version, n, n)
			}
			if most := n * (n + 1) / 2; got.Calls < n || got.Calls > most {
				t.Errorf("%s, %d clients: %d calls, want %d to %d", b.name, n, got.Calls, n, most)
			}
			if got.Completion <= 0 {
				t.Errorf("%s, %d clients: completed at %v", b.name, n, got.Completion)
			}
		}
	}
}

// Each failed write asks the backoff once, with the client's retry number
// counting from 1 and the delay it waited before its previous retry.
func TestContentionBackoffGetsRetryNumberAndPreviousDelay(t *testing.T) {
	asked := 0
	backoff := func(n int, prev time.Duration, _ Rand) time.Duration {
		asked++
		if want := time.Duration(n-1) * time.Millisecond; prev != want {
			t.Errorf("retry %d: prev = %v, want %v (the delay this backoff returned for retry %d)", n, prev, want, n-1)
		}
		return time.Duration(n) * time.Millisecond
	}
	got := Contention{Clients: 30, Backoff: backoff, Rand: seeded(3)}.Run()
	if want := got.Calls - got.Finished; asked != want || asked == 0 {
		t.Errorf("backoff asked %d times, want %d: once per failed write", asked, want)
	}
}

// With a near-constant network both clients' first writes arrive together:
// one wins, the other waits its backoff, then takes four more messages.
func TestContentionLoserWaitsItsBackoff(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		want time.Duration
	}{
		{"an hour", time.Hour, time.Hour + 80*time.Millisecond},
		{"nothing", 0, 80 * time.Millisecond},
		{"negative counts as nothing", -time.Hour, 80 * time.Millisecond},
	}
	for _, tc := range tests {
		backoff := func(int, time.Duration, Rand) time.Duration { return tc.wait }
		got := Contention{Clients: 2, Backoff: backoff, NetMean: 10 * time.Millisecond, NetStdDev: 1, Rand: seeded(1)}.Run()
		if got.Calls != 3 {
			t.Errorf("%s: %d calls, want 3", tc.name, got.Calls)
		}
		if d := got.Completion - tc.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: completed at %v, want %v", tc.name, got.Completion, tc.want)
		}
	}
}

func TestContentionWithoutClientsIsEmpty(t *testing.T) {
	if got := (Contention{}).Run(); got != (ContentionResult{}) {
		t.Errorf("no clients: %+v, want the zero result", got)
	}
}

// The AWS post's finding, by a wide margin at 100 clients (in runs of
// hearth-sim contention, about half the calls and a twelfth of the time):
// clients with full jitter spread out, while exponential backoff without
// jitter keeps them in lockstep, colliding again at every retry.
func TestContentionFullJitterBeatsExponentialWithoutJitter(t *testing.T) {
	const clients, runs = 100, 10
	mean := func(b Backoff) (calls float64, completion time.Duration) {
		for seed := range uint64(runs) {
			res := Contention{Clients: clients, Backoff: b, Rand: seeded(seed)}.Run()
			calls += float64(res.Calls) / runs
			completion += res.Completion / runs
		}
		return calls, completion
	}
	fullCalls, fullTime := mean(fullJitter)
	expCalls, expTime := mean(exponential)
	noneCalls, _ := mean(nil)
	if fullCalls >= expCalls {
		t.Errorf("mean calls: full jitter %.0f, exponential without jitter %.0f; want fewer with full jitter", fullCalls, expCalls)
	}
	if fullCalls >= noneCalls {
		t.Errorf("mean calls: full jitter %.0f, no backoff %.0f; want fewer with full jitter", fullCalls, noneCalls)
	}
	if fullTime >= expTime {
		t.Errorf("mean completion: full jitter %v, exponential without jitter %v; want sooner with full jitter", fullTime, expTime)
	}
}
