package main

// The figures of issue 14's table, each measured on the raw path and on
// Hearth's back to back in one process. Run them all with
//
//	go test -run '^$' -bench . -benchtime 1x ./cmd/hearthd/
//
// docs/PERFORMANCE.md says what each figure means and holds the table.
// Benchmarks measure; none asserts a time.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

var benchRate = flag.Float64("hearth.rate", 0, "figure benchmarks: commands per second of the half-load figure (0: half of hearthd's throughput, measured first)")

// pair is hearthd with the embedded broker, and on that same broker the
// raw path's simulated bridge (base topic raw) and Hearth's (base topic
// zigbee2mqtt), each playing the same switches, with an automation per
// path.
type pair struct {
	d           *daemon
	raw, hearth *path
}

// newPair starts hearthd with n switches, both bridges and both
// automations, and warms both paths with one command per device (at least
// 200), unmeasured.
func newPair(b *testing.B, n int) *pair {
	b.Helper()
	cfg := parseBenchConfig(b, benchConfig(n, 0), b.TempDir())
	d := startBenchHearth(b, cfg)
	names := switchNames(n)
	startSim(b, d.brokerURL, "bench-raw-sim", rawBase, names, nil)
	startSim(b, d.brokerURL, "bench-z2m-sim", simulator.DefaultBaseTopic, names, nil)
	p := &pair{d: d}
	warm := max(n, 200)
	if runRaw() {
		p.raw = rawPath(b, d.brokerURL, names)
		p.raw.closedLoop(warm, *benchInflight)
	}
	if runHearth() {
		p.hearth = hearthPath(b, d.brokerURL, names)
		p.hearth.closedLoop(warm, *benchInflight)
	}
	return p
}

// BenchmarkThroughput is figures 1 and 2: confirmed commands per second
// with -hearth.inflight (64) commands outstanding, on 100 and on 1,000
// devices, each command to a device with none outstanding. A command
// counts once the automation hears it confirmed: on the raw path the
// device's state report, on Hearth's the result succeeded.
func BenchmarkThroughput(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			p := newPair(b, n)
			var raw, hearth tally
			for b.Loop() {
				if runRaw() {
					raw.add(p.raw.closedLoop(*benchCmds, *benchInflight))
				}
				if runHearth() {
					hearth.add(p.hearth.closedLoop(*benchCmds, *benchInflight))
				}
			}
			b.ReportMetric(0, "ns/op")
			if runRaw() {
				b.ReportMetric(raw.perSecond(), "raw_cmd/s")
			}
			if runHearth() {
				b.ReportMetric(hearth.perSecond(), "hearth_cmd/s")
			}
			if runRaw() && runHearth() {
				b.ReportMetric(hearth.perSecond()/raw.perSecond(), "ratio")
			}
			reportLatency(b, raw, hearth)
		})
	}
}

// BenchmarkLatencyOneAtATime is figure 3: the latency of one command at
// a time (the next sent once the last is confirmed), 100 devices in turn.
func BenchmarkLatencyOneAtATime(b *testing.B) {
	p := newPair(b, 100)
	var raw, hearth tally
	for b.Loop() {
		if runRaw() {
			raw.add(p.raw.closedLoop(*benchSerial, 1))
		}
		if runHearth() {
			hearth.add(p.hearth.closedLoop(*benchSerial, 1))
		}
	}
	b.ReportMetric(0, "ns/op")
	reportLatency(b, raw, hearth)
}

// BenchmarkLatencyHalfLoad is figure 4: the latency of commands sent at
// a steady rate, half of hearthd's throughput on 100 devices (measured
// first with -hearth.inflight outstanding, unless -hearth.rate sets the
// rate), the same rate on both paths. Latency counts from each command's
// due time.
func BenchmarkLatencyHalfLoad(b *testing.B) {
	p := newPair(b, 100)
	rate, top := *benchRate, 0.0
	if rate <= 0 {
		if p.hearth == nil {
			p.hearth = hearthPath(b, p.d.brokerURL, switchNames(100))
		}
		top = p.hearth.closedLoop(*benchCmds, *benchInflight).perSecond()
		rate = top / 2
	}
	var raw, hearth tally
	for b.Loop() {
		if runRaw() {
			raw.add(p.raw.paced(*benchPaced, rate))
		}
		if runHearth() {
			hearth.add(p.hearth.paced(*benchPaced, rate))
		}
	}
	// After the loop: b.Loop's first call deletes metrics reported before.
	b.ReportMetric(0, "ns/op")
	if top > 0 {
		b.ReportMetric(top, "hearth_max_cmd/s")
	}
	b.ReportMetric(rate, "pace_cmd/s")
	reportLatency(b, raw, hearth)
}

// BenchmarkHeapIdle is figure 5's first half: hearthd's memory with
// -hearth.idle (10,000) devices that have each reported their state once
// and are idle. hearth_heap_MiB is the live heap after a full GC, less
// what it was before hearthd's config was parsed; it counts hearthd,
// its embedded broker (with its retained messages) and the bench's idle
// bridge client. process_rss_MiB is the whole test process.
func BenchmarkHeapIdle(b *testing.B) {
	if !runHearth() {
		b.Skip("hearthd only")
	}
	n := *benchIdle
	before := liveHeap()
	cfg := parseBenchConfig(b, benchConfig(n, 0), b.TempDir())
	d := startBenchHearth(b, cfg)
	names := switchNames(n)
	mirrored, watcher := watchMirrors(b, d.brokerURL, names)
	reportOnce(b, d.brokerURL, simulator.DefaultBaseTopic, names, mirrored)
	waitFor(b, fmt.Sprintf("hearthd to mirror the %d devices' states", n), 10**benchWait, func() bool { return mirrored.Load() >= int64(n) })
	watcher.Disconnect(0) // its memory is the bench's, not hearthd's
	var heap uint64
	for b.Loop() {
		heap = liveHeap()
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(int64(heap)-int64(before)), "hearth_heap_MiB")
	b.ReportMetric(mib(int64(rss())), "process_rss_MiB")
}

// BenchmarkPendingSleepy is figure 5's second half and figure 6: with
// -hearth.pending (10,000; 100,000 with -hearth.big) commands queued for
// sleepy lights that never wake (three per light, on distinct
// attributes, so that none supersedes another), hearthd's live heap as
// in BenchmarkHeapIdle; then hearthd is stopped and started again on the
// same store, and restart_ms is the time from before the config is
// parsed to the moment a new command's accepted reaches its sender (a
// fresh automation subscribed to hearth/+/result, which also hears
// whatever hearthd announces at the restart). The stop is a clean one in
// this process, not kill -9: the pending commands are in the store
// either way. fill_cmd/s is how fast the pending commands were taken in.
func BenchmarkPendingSleepy(b *testing.B) {
	if !runHearth() {
		b.Skip("hearthd only")
	}
	pending := pendingCount()
	lights := (pending + 2) / 3
	text := benchConfig(1, lights) // sw0000: the restart's new command
	dir := b.TempDir()
	before := liveHeap()
	cfg := parseBenchConfig(b, text, dir)
	d := startBenchHearth(b, cfg)
	reportOnce(b, d.brokerURL, simulator.DefaultBaseTopic, []string{switchName(0)}, nil)

	// The fill keeps at most 1,000 commands not yet queued, so that it
	// outruns nothing: a command lost before hearthd stores it would
	// never be queued.
	var queued atomic.Int64
	window := make(chan struct{}, 1000)
	fill := newAutomation(b, d.brokerURL, "bench-fill", "hearth/+/result", func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if json.Unmarshal(m.Payload(), &r) == nil && r.Status == devices.Queued {
			queued.Add(1)
			<-window
		}
	})
	attrs := []string{`"state":"ON"`, `"brightness":128`, `"color_temp":300`}
	start := time.Now()
	deadline := time.After(10 * *benchWait)
	for i := range pending + cap(window) {
		select {
		case window <- struct{}{}:
		case <-deadline:
			b.Fatalf("%d of %d commands queued after %v", queued.Load(), pending, 10**benchWait)
		}
		if i < pending {
			fill.Publish("hearth/"+sleepyName(i/3)+"/set", 1, false, fmt.Sprintf(`{%s,"op_id":"p%d"}`, attrs[i%3], i))
		}
	}
	fillRate := float64(pending) / time.Since(start).Seconds()
	fill.Disconnect(0)
	heap, resident := int64(liveHeap())-int64(before), rss()

	var restart time.Duration
	round := 0
	for b.Loop() {
		d.stop()
		round++
		t0 := time.Now()
		d = startBenchHearth(b, parseBenchConfig(b, text, dir))
		op := fmt.Sprintf("restart%d", round)
		accepted := make(chan struct{})
		var once sync.Once
		a := newAutomation(b, d.brokerURL, fmt.Sprintf("bench-restart-%d", round), "hearth/+/result", func(_ paho.Client, m paho.Message) {
			var r devices.Result
			if json.Unmarshal(m.Payload(), &r) == nil && r.OpID == op && r.Status == devices.Accepted {
				once.Do(func() { close(accepted) })
			}
		})
		a.Publish("hearth/"+switchName(0)+"/set", 1, false, `{"state":"ON","op_id":"`+op+`"}`)
		select {
		case <-accepted:
		case <-time.After(10 * *benchWait):
			b.Fatalf("no accepted for the new command %v after the restart", 10**benchWait)
		}
		restart += time.Since(t0)
		a.Disconnect(0)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(restart)/float64(round), "restart_ms")
	b.ReportMetric(fillRate, "fill_cmd/s")
	b.ReportMetric(mib(heap), "hearth_heap_MiB")
	b.ReportMetric(mib(int64(resident)), "process_rss_MiB")
}

// BenchmarkBurst is figure 7: a burst of -hearth.burst (50,000) commands, round robin over 100 devices, as fast as an
// MQTT 3.1.1 client (eclipse/paho.mqtt.golang, which nothing throttles)
// and an MQTT 5 client (eclipse/paho.golang, which keeps to the broker's
// Receive Maximum) publish them at QoS 1. Counts, not times: sent,
// PUBACKed, and on the raw path delivered (sets the devices received),
// on Hearth's stored (in hearthd's store) and terminal (stored with a
// terminal status); lost is PUBACKed and never delivered or stored.
// burst_s is how long the burst took until everything had settled.
func BenchmarkBurst(b *testing.B) {
	for _, proto := range []string{"mqtt311", "mqtt5"} {
		b.Run(proto, func(b *testing.B) {
			n := *benchBurstN
			cfg := parseBenchConfig(b, benchConfig(100, 0), b.TempDir())
			d := startBenchHearth(b, cfg)
			names := switchNames(100)
			var delivered atomic.Int64
			startSim(b, d.brokerURL, "bench-raw-sim", rawBase, names, func(simulator.SetEvent) { delivered.Add(1) })
			startSim(b, d.brokerURL, "bench-z2m-sim", simulator.DefaultBaseTopic, names, nil)
			round := 0
			for b.Loop() {
				round++
				if runRaw() {
					delivered.Store(0)
					start := time.Now()
					acked := burst(b, proto, d.brokerURL, fmt.Sprintf("bench-burst-raw-%d", round), n, func(i int) (string, string) {
						return rawBase + "/" + names[i%100] + "/set", onOff(i)
					})
					end := settle(func() int64 { return delivered.Load() })
					b.ReportMetric(float64(n), "raw_sent")
					b.ReportMetric(float64(count(acked)), "raw_pubacked")
					b.ReportMetric(float64(delivered.Load()), "raw_delivered")
					b.ReportMetric(float64(int64(count(acked))-delivered.Load()), "raw_lost")
					b.ReportMetric(end.Sub(start).Seconds(), "raw_burst_s")
				}
				if runHearth() {
					start := time.Now()
					prefix := fmt.Sprintf("r%d-", round)
					acked := burst(b, proto, d.brokerURL, fmt.Sprintf("bench-burst-hearth-%d", round), n, func(i int) (string, string) {
						return "hearth/" + names[i%100] + "/set", fmt.Sprintf(`{"state":"%s","op_id":"%s%d"}`, onOff(i), prefix, i)
					})
					s := storedTerminal(b, d, prefix, acked)
					b.ReportMetric(float64(n), "hearth_sent")
					b.ReportMetric(float64(count(acked)), "hearth_pubacked")
					b.ReportMetric(float64(s.stored), "hearth_stored")
					b.ReportMetric(float64(s.terminal), "hearth_terminal")
					b.ReportMetric(float64(s.succeeded), "hearth_succeeded")
					b.ReportMetric(float64(s.superseded), "hearth_superseded")
					b.ReportMetric(float64(s.lost), "hearth_lost")
					b.ReportMetric(s.end.Sub(start).Seconds(), "hearth_burst_s")
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func onOff(i int) string {
	if i%200 < 100 { // each device alternates ON, OFF, …
		return "ON"
	}
	return "OFF"
}

func count(acked []bool) int {
	n := 0
	for _, a := range acked {
		if a {
			n++
		}
	}
	return n
}

// burst publishes n commands (topic and payload of the i-th from cmd) at
// QoS 1 as fast as a fresh client of proto publishes them, and returns
// which of them were PUBACKed within 10 × -hearth.wait.
func burst(tb testing.TB, proto, brokerURL, clientID string, n int, cmd func(i int) (topic, payload string)) []bool {
	tb.Helper()
	acked := make([]bool, n)
	deadline := time.Now().Add(10 * *benchWait)
	if proto == "mqtt311" {
		c := newAutomation(tb, brokerURL, clientID, "", nil)
		toks := make([]paho.Token, n)
		for i := range n {
			topic, payload := cmd(i)
			toks[i] = c.Publish(topic, 1, false, payload)
		}
		for i, tok := range toks {
			acked[i] = tok.WaitTimeout(time.Until(deadline)) && tok.Error() == nil
		}
		c.Disconnect(0)
		return acked
	}
	u, err := url.Parse(brokerURL)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn})
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := c.Connect(ctx, &paho5.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true}); err != nil {
		tb.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 512 { // more than any Receive Maximum the broker grants by default
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				topic, payload := cmd(i)
				_, err := c.Publish(ctx, &paho5.Publish{Topic: topic, QoS: 1, Payload: []byte(payload)})
				acked[i] = err == nil
			}
		})
	}
	wg.Wait()
	c.Disconnect(&paho5.Disconnect{})
	conn.Close()
	<-c.Done()
	return acked
}

// burstOutcome is what became of a burst's commands in hearthd's store.
type burstOutcome struct {
	stored, terminal      int
	succeeded, superseded int // of the terminal ones
	// lost were PUBACKed but are not stored.
	lost int
	// end is when the last of them became terminal.
	end time.Time
}

// storedTerminal waits until every command of the burst (op_ids prefix0…)
// that hearthd stored is terminal and no more arrive, and says what
// became of them; acked says which were PUBACKed.
func storedTerminal(tb testing.TB, d *daemon, prefix string, acked []bool) burstOutcome {
	tb.Helper()
	status := make([]devices.Status, len(acked)) // "" while not stored
	var o burstOutcome
	o.end = settle(func() int64 {
		o.stored, o.terminal = 0, 0
		for i := range acked {
			if !status[i].Terminal() {
				op, found, err := d.store.Lookup(prefix + strconv.Itoa(i))
				if err != nil {
					tb.Fatal(err)
				}
				if found {
					status[i] = op.Status
				}
			}
			if status[i] != "" {
				o.stored++
			}
			if status[i].Terminal() {
				o.terminal++
			}
		}
		if o.terminal < o.stored {
			return -1 // still moving: not settled
		}
		return int64(o.stored)
	})
	for i, a := range acked {
		switch {
		case a && status[i] == "":
			o.lost++
		case status[i] == devices.Succeeded:
			o.succeeded++
		case status[i] == devices.Superseded:
			o.superseded++
		}
	}
	return o
}

// settle polls progress every 500 ms until it has returned the same
// non-negative value 4 times in a row (2 s without change), or for
// 10 × -hearth.wait at most, and returns when the value last changed.
func settle(progress func() int64) time.Time {
	deadline := time.Now().Add(10 * *benchWait)
	last, same, changed := int64(-1), 0, time.Now()
	for same < 4 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		v := progress()
		if v >= 0 && v == last {
			same++
		} else {
			same, changed = 0, time.Now()
		}
		last = v
	}
	return changed
}

// watchMirrors counts the devices of names whose state hearthd has
// mirrored on hearth/<device> (retained), with a client subscribed until
// it is disconnected or tb ends.
func watchMirrors(tb testing.TB, brokerURL string, names []string) (*atomic.Int64, paho.Client) {
	tb.Helper()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want["hearth/"+n] = true
	}
	var mu sync.Mutex
	var seen atomic.Int64
	c := newAutomation(tb, brokerURL, "bench-mirrors", "hearth/+", func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		if want[m.Topic()] {
			delete(want, m.Topic())
			seen.Add(1)
		}
	})
	return &seen, c
}

// reportOnce plays a Zigbee2MQTT bridge under base that comes online and
// reports each device of names once, available with state OFF, then only
// stays connected (until tb ends): devices that exist and are idle,
// without the simulator's goroutine per device in this process's heap.
// With mirrored (see watchMirrors), it keeps at most 500 devices reported
// and not yet mirrored, so that it outruns nothing: a report lost before
// hearthd hears it would never be mirrored.
func reportOnce(tb testing.TB, brokerURL, base string, names []string, mirrored *atomic.Int64) {
	tb.Helper()
	c := newAutomation(tb, brokerURL, "bench-bridge-"+base, "", nil)
	mustToken(tb, c.Publish(base+"/bridge/state", 1, true, `{"state":"online"}`))
	toks := make([]paho.Token, 0, 2*len(names))
	for i, n := range names {
		if mirrored != nil {
			waitFor(tb, "hearthd to mirror what was reported", *benchWait, func() bool { return int64(i)-mirrored.Load() < 500 })
		}
		toks = append(toks, c.Publish(base+"/"+n+"/availability", 1, true, `{"state":"online"}`),
			c.Publish(base+"/"+n, 1, false, `{"state":"OFF"}`))
	}
	for _, t := range toks {
		mustToken(tb, t)
	}
}

// waitFor polls cond every 10 ms until it holds, and fails tb after
// within.
func waitFor(tb testing.TB, what string, within time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
