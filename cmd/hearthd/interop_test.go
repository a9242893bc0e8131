package main

// Interop tests: the real hearthd and hearth-sim binaries, built once per
// test binary run, against Debian's Mosquitto broker, with Mosquitto's own
// command line clients playing the automation. Nothing here sleeps: every
// wait is for a log line, a message or a process exit, with a deadline.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
)

// interopWait is the failure deadline of every single wait below; waits
// end as soon as what they wait for happens.
const interopWait = 15 * time.Second

// ---------------------------------------------------------------------------
// Building the binaries

var (
	buildOnce sync.Once
	buildDir  string
	buildOut  []byte
	buildErr  error
)

// builtBinaries builds hearthd, hearth-sim and hearthctl from this tree,
// once per test binary run, the first time a test asks, and returns the
// paths of the first two (builtHearthctl the third's). The
// build is not -race (quicker), but inherits the environment, GOFLAGS
// included. The binaries live in a temporary directory that
// removeBuiltBinaries deletes; TestMain should call it after m.Run.
func builtBinaries(t *testing.T) (hearthd, sim string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "hearth-interop-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildDir+string(filepath.Separator),
			"./cmd/hearthd", "./cmd/hearth-sim", "./cmd/hearthctl")
		cmd.Dir = filepath.Join("..", "..") // the module root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building hearthd and hearth-sim: %v\n%s", buildErr, buildOut)
	}
	return filepath.Join(buildDir, "hearthd"), filepath.Join(buildDir, "hearth-sim")
}

// builtHearthctl is builtBinaries's hearthctl.
func builtHearthctl(t *testing.T) string {
	t.Helper()
	builtBinaries(t)
	return filepath.Join(buildDir, "hearthctl")
}

// removeBuiltBinaries deletes what builtBinaries built, if anything.
func removeBuiltBinaries() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// checkLeaks fails t if a goroutine started during t outlives it. Call it
// first, so that its check runs after every other cleanup of t.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := goleak.Find(ignore); err != nil {
			t.Error(err)
		}
	})
}

// ---------------------------------------------------------------------------
// Subprocesses

// lineLog collects a process's output line by line and wakes waiters on
// every new line.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced when lines grow
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	grew := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		grew = true
	}
	if grew {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// flush ends an unterminated last line.
func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.lines = append(l.lines, string(l.partial))
		l.partial = nil
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// since returns the lines from index from on, and a channel closed when
// more arrive.
func (l *lineLog) since(from int) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from > len(l.lines) {
		from = len(l.lines)
	}
	return append([]string(nil), l.lines[from:]...), l.changed
}

// proc is a running subprocess whose stdout and stderr go, line by line,
// into out. Its cleanup stops it with SIGTERM and, if the test failed,
// copies its output into the test log.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *lineLog
	done chan struct{} // closed once it exited and its output is read
	err  error         // cmd.Wait's result, set before done closes
}

func startProc(t *testing.T, name, path string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: newLineLog(), done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.WaitDelay = 5 * time.Second // bounds Wait if a pipe stays open
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.out.flush()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			lines, _ := p.out.since(0)
			t.Logf("--- %s %s: %d lines of output", name, strings.Join(args, " "), len(lines))
			for _, l := range lines {
				t.Logf("%s: %s", name, l)
			}
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// awaitLine waits for an output line that contains substr, from line index
// from on, and returns its index; false if the process exited without
// printing one. It fails the test if neither happens in time.
func (p *proc) awaitLine(substr string, from int) (int, bool) {
	p.t.Helper()
	deadline := time.NewTimer(interopWait)
	defer deadline.Stop()
	for {
		lines, changed := p.out.since(from)
		for i, l := range lines {
			if strings.Contains(l, substr) {
				return from + i, true
			}
		}
		from += len(lines)
		select {
		case <-changed:
		case <-p.done:
			lines, _ := p.out.since(from)
			for i, l := range lines {
				if strings.Contains(l, substr) {
					return from + i, true
				}
			}
			return 0, false
		case <-deadline.C:
			p.t.Fatalf("%s: no line with %q within %s", p.name, substr, interopWait)
		}
	}
}

// mustLine is awaitLine that fails the test if the process exits first.
func (p *proc) mustLine(substr string, from int) int {
	p.t.Helper()
	i, ok := p.awaitLine(substr, from)
	if !ok {
		p.t.Fatalf("%s exited (%v) before printing a line with %q", p.name, p.err, substr)
	}
	return i
}

// wait waits for the process to exit by itself and returns how it ended.
func (p *proc) wait() error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(interopWait):
		p.t.Fatalf("%s did not exit within %s", p.name, interopWait)
		return nil
	}
}

// signal sends sig and waits for the exit, killing the process if it does
// not exit in time.
func (p *proc) signal(sig os.Signal) error {
	if p.exited() {
		return p.err
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("%s: signal %v: %v", p.name, sig, err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(interopWait):
		p.t.Errorf("%s did not exit within %s of %v; killing it", p.name, interopWait, sig)
		p.cmd.Process.Kill()
		<-p.done
		return p.err
	}
}

// stop is the graceful stop: SIGTERM, then wait.
func (p *proc) stop() error { return p.signal(syscall.SIGTERM) }

// ---------------------------------------------------------------------------
// Mosquitto

// mosquittoTools returns the broker's path, or skips the test when
// Mosquitto is missing; under CI (CI set) a missing Mosquitto fails it.
func mosquittoTools(t *testing.T) string {
	t.Helper()
	var missing []string
	broker := "/usr/sbin/mosquitto"
	if _, err := os.Stat(broker); err != nil {
		if broker, err = exec.LookPath("mosquitto"); err != nil {
			missing = append(missing, "mosquitto")
		}
	}
	for _, c := range []string{"mosquitto_sub", "mosquitto_pub"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("Mosquitto is not installed (%s not found); install the Debian packages mosquitto and mosquitto-clients, as .ci/run does",
			strings.Join(missing, ", "))
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set: the interop tests must run there)")
		}
		t.Skip(msg)
	}
	return broker
}

// mosquitto is one Mosquitto broker of a test, on a loopback port.
type mosquitto struct {
	t    *testing.T
	port string
	proc *proc
	// creds are the -u and -P of the tests' own clients (subscribers,
	// probes) on a broker that authenticates; none by default.
	creds []string
	// bin and conf are the broker and its configuration file, for restart.
	bin, conf string
}

// startMosquitto starts Mosquitto on a free loopback port, without
// persistence, and waits until it says it is running. A port taken
// between picking and binding makes it exit; then it tries another port,
// three times in all.
func startMosquitto(t *testing.T) *mosquitto {
	t.Helper()
	return startMosquittoWith(t, t.TempDir(), "persistence false\n")
}

// startPersistentMosquitto is startMosquitto with persistence on, its
// database in a directory that Mosquitto's own user may write: started
// as root, Mosquitto runs as the user mosquitto, and t.TempDir's parent
// is root's alone.
func startPersistentMosquitto(t *testing.T) *mosquitto {
	t.Helper()
	dir, err := os.MkdirTemp("", "mosquitto")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return startMosquittoWith(t, dir, fmt.Sprintf("persistence true\npersistence_location %s/\n", dir))
}

// startMosquittoWith starts Mosquitto with settings added to its listener
// and log lines, its configuration file in dir.
func startMosquittoWith(t *testing.T, dir, settings string) *mosquitto {
	t.Helper()
	bin := mosquittoTools(t)
	for try := 1; ; try++ {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("mosquitto-%d.conf", try))
		content := fmt.Sprintf("listener %s 127.0.0.1\nallow_anonymous true\n%slog_dest stderr\n", port, settings)
		if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		b := &mosquitto{t: t, port: port, bin: bin, conf: conf}
		if b.run() {
			return b
		}
		if try == 3 {
			t.Fatalf("mosquitto did not start on a free port after %d tries (last: %v)", try, b.proc.stop())
		}
		t.Logf("mosquitto did not start on port %s (%v); trying another port", port, b.proc.stop())
	}
}

// run starts the broker and reports whether it said it is running.
func (b *mosquitto) run() bool {
	b.t.Helper()
	b.proc = startProc(b.t, "mosquitto", b.bin, "-c", b.conf)
	// "mosquitto version 2.0.11 running", whatever the version.
	i, ok := b.proc.awaitLine(" running", 0)
	if ok {
		lines, _ := b.proc.out.since(i)
		ok = strings.Contains(lines[0], "mosquitto version")
	}
	return ok
}

// restart stops the broker cleanly (with persistence on, it saves its
// database as it exits) and starts it again on the same port.
func (b *mosquitto) restart() {
	b.t.Helper()
	if err := b.proc.stop(); err != nil {
		b.t.Fatalf("mosquitto after SIGTERM: %v", err)
	}
	if !b.run() {
		b.t.Fatalf("mosquitto did not start again on port %s (%v)", b.port, b.proc.stop())
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func (b *mosquitto) url() string { return "tcp://127.0.0.1:" + b.port }

func (b *mosquitto) clientArgs() []string {
	return append([]string{"-h", "127.0.0.1", "-p", b.port, "-V", "mqttv311"}, b.creds...)
}

// pub publishes with mosquitto_pub at QoS 1: it returns once the broker
// has acknowledged the message, so the broker has taken it.
func (b *mosquitto) pub(args ...string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mosquitto_pub", append(append(b.clientArgs(), "-q", "1"), args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.t.Fatalf("mosquitto_pub %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// subFormat makes mosquitto_sub print each message as
// retain-flag TAB topic TAB payload: topics such as "zigbee2mqtt/Front
// Door/set" have spaces, so -v's "topic payload" would be ambiguous.
const subFormat = `%r\t%t\t%p`

// msg is one message a mosquitto_sub printed.
type msg struct {
	retained bool
	topic    string
	payload  string
}

func (m msg) String() string {
	return fmt.Sprintf("%s %q (retained %v)", m.topic, m.payload, m.retained)
}

func parseMsg(line string) (msg, bool) {
	f := strings.SplitN(line, "\t", 3)
	if len(f) != 3 || (f[0] != "0" && f[0] != "1") {
		return msg{}, false
	}
	return msg{retained: f[0] == "1", topic: f[1], payload: f[2]}, true
}

// retained returns the one message mosquitto_sub -C 1 gets on topic: the
// retained one.
func (b *mosquitto) retained(topic string) msg {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	args := append(b.clientArgs(), "-t", topic, "-C", "1", "-W", "10", "-F", subFormat)
	out, err := exec.CommandContext(ctx, "mosquitto_sub", args...).CombinedOutput()
	if err != nil {
		b.t.Fatalf("mosquitto_sub -t %s -C 1: %v\n%s", topic, err, out)
	}
	m, ok := parseMsg(strings.TrimSuffix(string(out), "\n"))
	if !ok {
		b.t.Fatalf("mosquitto_sub -t %s -C 1 printed %q; want one message", topic, out)
	}
	return m
}

var probeSeq atomic.Int64

// sub is a running mosquitto_sub.
type sub struct {
	*proc
	probe string
	read  int // index of the next output line to read
	// before are the messages that came before the readiness probe: the
	// retained messages of the subscribed topics.
	before []msg
}

// subscribe starts mosquitto_sub on topics and returns once the broker has
// the subscription. count > 0 makes it exit after that many messages
// (-C), besides the probe.
//
// Readiness: mosquitto_sub's -d debug output ("received SUBACK") is block
// buffered when it goes to a pipe, so it arrives late. Instead each sub
// also subscribes, last, to a probe topic of its own that holds a retained
// message: the broker sends retained messages after the subscription is in
// place, filter by filter in the order given, so the probe's arrival means
// the subscription is live, and whatever came before it is the retained
// state of the other topics.
func (b *mosquitto) subscribe(count int, topics ...string) *sub {
	b.t.Helper()
	probe := fmt.Sprintf("hearth-test/probe/%d", probeSeq.Add(1))
	b.pub("-r", "-t", probe, "-m", "ready")
	args := append(b.clientArgs(), "-q", "1", "-F", subFormat)
	for _, topic := range topics {
		args = append(args, "-t", topic)
	}
	args = append(args, "-t", probe)
	if count > 0 {
		args = append(args, "-C", strconv.Itoa(count+1), "-W", "20")
	}
	s := &sub{proc: startProc(b.t, "mosquitto_sub "+strings.Join(topics, " "), "mosquitto_sub", args...), probe: probe}
	for {
		m := s.nextAny()
		if m.topic == probe {
			if !m.retained || m.payload != "ready" {
				b.t.Fatalf("%s: probe %s; want the retained probe", s.name, m)
			}
			return s
		}
		s.before = append(s.before, m)
	}
}

// nextAny returns the next message, the probe's included.
func (s *sub) nextAny() msg {
	s.t.Helper()
	deadline := time.NewTimer(interopWait)
	defer deadline.Stop()
	for {
		lines, changed := s.out.since(s.read)
		if len(lines) > 0 {
			s.read++
			m, ok := parseMsg(lines[0])
			if !ok {
				s.t.Fatalf("%s printed %q; want a message", s.name, lines[0])
			}
			return m
		}
		select {
		case <-changed:
		case <-s.done:
			if lines, _ := s.out.since(s.read); len(lines) > 0 {
				continue
			}
			s.t.Fatalf("%s exited (%v) while a message was awaited", s.name, s.err)
		case <-deadline.C:
			s.t.Fatalf("%s: no message within %s", s.name, interopWait)
		}
	}
}

// next returns the next message of the subscribed topics.
func (s *sub) next() msg {
	s.t.Helper()
	m := s.nextAny()
	if m.topic == s.probe {
		s.t.Fatalf("%s: got the probe %q; want a message of the subscribed topics", s.name, m.payload)
	}
	return m
}

// result returns the next message, which must be a result on topic, decoded
// strictly: no field outside the contract.
func (s *sub) result(topic string) (devices.Result, string) {
	s.t.Helper()
	m := s.next()
	if m.topic != topic || m.retained {
		s.t.Fatalf("%s: got %s; want a result on %s, not retained", s.name, m, topic)
	}
	dec := json.NewDecoder(strings.NewReader(m.payload))
	dec.DisallowUnknownFields()
	var r devices.Result
	if err := dec.Decode(&r); err != nil {
		s.t.Fatalf("result %s is not the contract's JSON: %v", m.payload, err)
	}
	return r, m.payload
}

// sync publishes to the sub's probe topic and returns every message that
// came before it: a barrier that shows everything the broker had routed
// to this subscriber earlier has arrived.
func (s *sub) sync(b *mosquitto) []msg {
	s.t.Helper()
	token := fmt.Sprintf("sync-%d", probeSeq.Add(1))
	b.pub("-t", s.probe, "-m", token)
	var got []msg
	for {
		m := s.nextAny()
		if m.topic == s.probe && m.payload == token {
			return got
		}
		got = append(got, m)
	}
}

// finished waits for a -C sub to exit after its count, successfully.
func (s *sub) finished() {
	s.t.Helper()
	if err := s.wait(); err != nil {
		s.t.Fatalf("%s: %v; want it to exit 0 after its -C count", s.name, err)
	}
}

// ---------------------------------------------------------------------------
// hearthd's configuration

// writeInteropConfig writes a hearthd configuration for the external
// broker at brokerURL, with the given service retry block, and returns
// its path.
func writeInteropConfig(t *testing.T, brokerURL, dataDir, retry string) string {
	t.Helper()
	return writeInteropConfigDevices(t, brokerURL, dataDir, retry, `  hall_light:
    service: zigbee
    class: light
  front_door:
    service: zigbee
    class: lock
    address: Front Door
`)
}

// writeInteropConfigDevices is writeInteropConfig with the given devices
// block (YAML under devices:, indented by two spaces).
func writeInteropConfigDevices(t *testing.T, brokerURL, dataDir, retry, devs string) string {
	t.Helper()
	content := fmt.Sprintf(`prefix: hearth
data_dir: %q
mqtt:
  url: %s
  reconnect: {base: 10ms, cap: 200ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    base_topic: zigbee2mqtt
    retry:
%s
devices:
%s`, dataDir, brokerURL, retry, devs)
	path := filepath.Join(t.TempDir(), "hearth.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkResult compares the parts of a result a test knows exactly.
func checkResult(t *testing.T, got devices.Result, opID, device string, status devices.Status, reason devices.Reason, attempts int, target devices.Target) {
	t.Helper()
	if got.OpID != opID || got.Device != device || got.Status != status || got.Reason != reason || got.Attempts != attempts {
		t.Fatalf("result %+v; want op_id %s, device %s, status %s, reason %q, attempts %d",
			got, opID, device, status, reason, attempts)
	}
	if !reflect.DeepEqual(got.Target, target) {
		t.Fatalf("result %s/%s target %v; want %v", opID, status, got.Target, target)
	}
	if got.At.IsZero() {
		t.Fatalf("result %s/%s has no at", opID, status)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -2
	}
	return 0
}

// ---------------------------------------------------------------------------
// Tests

// hearthd and hearth-sim against Mosquitto, with Mosquitto's clients as
// the automation: a command succeeds, a repeat of its op_id returns the
// stored result and moves nothing, a retained command is refused, and the
// bridge state is online while hearthd runs and offline after it stops.
func TestInteropWithMosquitto(t *testing.T) {
	checkLeaks(t)
	b := startMosquitto(t)
	hearthdBin, simBin := builtBinaries(t)
	cfg := writeInteropConfig(t, b.url(), t.TempDir(),
		"      attempt_timeout: 2s\n      base: 100ms\n      cap: 500ms")

	// Every set that reaches any device, from the very beginning.
	sets := b.subscribe(0, "zigbee2mqtt/+/set")
	if len(sets.before) != 0 {
		t.Fatalf("retained sets before anything ran: %v", sets.before)
	}

	sim := startProc(t, "hearth-sim", simBin, "-broker", b.url(), "-config", cfg)
	sim.mustLine("hearth-sim ready", 0)
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)

	online := msg{retained: true, topic: "hearth/bridge/state", payload: "online"}
	if m := b.retained("hearth/bridge/state"); m != online {
		t.Fatalf("hearth/bridge/state: %s; want %s", m, online)
	}

	// A command: accepted, then succeeded on the first attempt.
	on := devices.Target{"state": "ON"}
	results := b.subscribe(2, "hearth/hall_light/result")
	b.pub("-t", "hearth/hall_light/set", "-m", `{"state":"ON","op_id":"a1"}`)
	accepted, _ := results.result("hearth/hall_light/result")
	succeeded, succeededJSON := results.result("hearth/hall_light/result")
	results.finished()
	checkResult(t, accepted, "a1", "hall_light", devices.Accepted, "", 0, on)
	checkResult(t, succeeded, "a1", "hall_light", devices.Succeeded, "", 1, on)
	if succeeded.State["state"] != "ON" {
		t.Errorf("a1 succeeded with state %v; want state ON", succeeded.State)
	}
	if succeeded.At.Before(accepted.At) {
		t.Errorf("a1 succeeded at %s, before it was accepted at %s", succeeded.At, accepted.At)
	}

	// The same command again: the single next result is the stored one,
	// word for word.
	results = b.subscribe(1, "hearth/hall_light/result")
	b.pub("-t", "hearth/hall_light/set", "-m", `{"state":"ON","op_id":"a1"}`)
	again, againJSON := results.result("hearth/hall_light/result")
	results.finished()
	checkResult(t, again, "a1", "hall_light", devices.Succeeded, "", 1, on)
	if !again.At.Equal(succeeded.At) || againJSON != succeededJSON {
		t.Errorf("repeat of a1 answered %s; want the stored result %s", againJSON, succeededJSON)
	}

	// A retained command is refused. Mosquitto_pub speaks MQTT 3.1.1;
	// hearthd subscribes with MQTT 5's retain-as-published, which is what
	// lets it see the flag on a live message.
	results = b.subscribe(1, "hearth/hall_light/result")
	b.pub("-r", "-t", "hearth/hall_light/set", "-m", `{"state":"OFF","op_id":"r1"}`)
	rejected, _ := results.result("hearth/hall_light/result")
	results.finished()
	checkResult(t, rejected, "r1", "hall_light", devices.Rejected, devices.ReasonRetainedCommand, 0, nil)
	if rejected.Detail == "" {
		t.Errorf("rejection of r1 has no detail")
	}
	// Clear it, and check that it is gone: a new subscriber gets no
	// retained command.
	b.pub("-r", "-n", "-t", "hearth/hall_light/set")
	if check := b.subscribe(0, "hearth/hall_light/set"); len(check.before) != 0 {
		t.Fatalf("retained command still there after clearing it: %v", check.before)
	}

	// A barrier: a command to the lock, an UNLOCK (the simulated lock
	// starts locked), which Hearth reads through the bridge before its
	// set. Its set reaching the counting subscriber after hall_light's
	// shows every earlier set has arrived.
	unlock := devices.Target{"state": "UNLOCK"}
	lockResults := b.subscribe(2, "hearth/front_door/result")
	b.pub("-t", "hearth/front_door/set", "-m", `{"state":"UNLOCK","op_id":"b1"}`)
	r, _ := lockResults.result("hearth/front_door/result")
	checkResult(t, r, "b1", "front_door", devices.Accepted, "", 0, unlock)
	r, _ = lockResults.result("hearth/front_door/result")
	checkResult(t, r, "b1", "front_door", devices.Succeeded, "", 1, unlock)
	if r.State["lock_state"] != "unlocked" {
		t.Errorf("b1 succeeded with state %v; want lock_state unlocked", r.State)
	}
	lockResults.finished()

	var seen []msg
	for {
		m := sets.next()
		seen = append(seen, m)
		if m.topic == "zigbee2mqtt/Front Door/set" {
			break
		}
	}
	wantSets := []msg{
		{topic: "zigbee2mqtt/hall_light/set", payload: `{"state":"ON"}`},
		{topic: "zigbee2mqtt/Front Door/set", payload: `{"state":"UNLOCK"}`},
	}
	if !reflect.DeepEqual(seen, wantSets) {
		t.Fatalf("sets that reached the devices: %v; want exactly %v (a1 once, nothing for its repeat or r1, then b1)", seen, wantSets)
	}

	// hearthd stops cleanly on SIGTERM and says offline, retained.
	if err := hd.stop(); err != nil {
		t.Fatalf("hearthd after SIGTERM: %v; want exit status 0", err)
	}
	offline := msg{retained: true, topic: "hearth/bridge/state", payload: "offline"}
	if m := b.retained("hearth/bridge/state"); m != offline {
		t.Fatalf("hearth/bridge/state after hearthd stopped: %s; want %s", m, offline)
	}
	// hearthd is gone: nothing it sent is still on its way, and nothing
	// more reached a device.
	if more := sets.sync(b); len(more) != 0 {
		t.Errorf("sets after the barrier: %v; want none", more)
	}
}

// A command accepted before hearthd is killed with SIGKILL is resumed by
// the next hearthd on the same data directory, which waits out the rest of
// the attempt's window (the device dropped the set: its state is not the
// target) and then resends it: it succeeds on its second attempt, two
// sets in all, no more. If the kill took its PUBACK along, hearthd's
// session delivers it again, and its op_id answers it.
func TestKill9ResumesPendingCommand(t *testing.T) {
	checkLeaks(t)
	b := startMosquitto(t)
	hearthdBin, simBin := builtBinaries(t)
	// The first attempt waits 3 s for a confirmation that never comes:
	// hearthd is killed while it waits, and the next one waits for the
	// rest of those 3 s.
	cfg := writeInteropConfig(t, b.url(), t.TempDir(),
		"      max_attempts: 2\n      attempt_timeout: 3s\n      base: 100ms\n      cap: 200ms")

	sets := b.subscribe(0, "zigbee2mqtt/+/set")
	results := b.subscribe(0, "hearth/hall_light/result")
	sim := startProc(t, "hearth-sim", simBin, "-broker", b.url(), "-config", cfg, "-drop-first", "1")
	sim.mustLine("hearth-sim ready", 0)
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)
	state := b.subscribe(0, "hearth/bridge/state")
	online := msg{retained: true, topic: "hearth/bridge/state", payload: "online"}
	if !reflect.DeepEqual(state.before, []msg{online}) {
		t.Fatalf("hearth/bridge/state: %v; want %s", state.before, online)
	}

	on := devices.Target{"state": "ON"}
	b.pub("-t", "hearth/hall_light/set", "-m", `{"state":"ON","op_id":"k1","ttl":"1h"}`)
	r, _ := results.result("hearth/hall_light/result")
	checkResult(t, r, "k1", "hall_light", devices.Accepted, "", 0, on)
	set := msg{topic: "zigbee2mqtt/hall_light/set", payload: `{"state":"ON"}`}
	if m := sets.next(); m != set {
		t.Fatalf("first set: %s; want %s", m, set)
	}
	sim.mustLine(`msg="set dropped" device=hall_light`, 0)

	err := hd.signal(syscall.SIGKILL)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("hearthd after SIGKILL: %v; want killed by SIGKILL", err)
	}
	// Mosquitto publishes the will when the socket dies.
	if m := state.next(); m != (msg{topic: "hearth/bridge/state", payload: "offline"}) {
		t.Fatalf("after SIGKILL, hearth/bridge/state: %s; want the will, offline", m)
	}
	offline := msg{retained: true, topic: "hearth/bridge/state", payload: "offline"}
	if m := b.retained("hearth/bridge/state"); m != offline {
		t.Fatalf("retained hearth/bridge/state after SIGKILL: %s; want %s", m, offline)
	}

	hd = startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="pending commands resumed" component=dispatcher resumed=1 ended=0`, 0)
	for {
		r, _ = results.result("hearth/hall_light/result")
		if r.Status != devices.Accepted {
			break
		}
		// k1 again from hearthd's session: the kill may have come before
		// its PUBACK went out (paho writes them every 50 ms), and Mosquitto
		// delivers it again. Its op_id is known: the answer is the stored
		// command, still accepted, and nothing runs twice.
		checkResult(t, r, "k1", "hall_light", devices.Accepted, "", 1, on)
	}
	if r.Status == devices.Failed && r.Reason == devices.ReasonSendFailed {
		// Seen in about 1 run in 10 while hearthd has this bug.
		t.Fatalf("k1 ended %s/%s (%s) without its second set ever leaving: the resumed attempt "+
			"fell due before the new hearthd's MQTT connection was up, and a send that never left "+
			"counted as an attempt. This is a hearthd bug (dispatcher/device.go, execute), not a test fault.",
			r.Status, r.Reason, r.Detail)
	}
	checkResult(t, r, "k1", "hall_light", devices.Succeeded, "", 2, on)
	if r.State["state"] != "ON" {
		t.Errorf("k1 succeeded with state %v; want state ON", r.State)
	}
	if m := sets.next(); m != set {
		t.Fatalf("second set: %s; want %s", m, set)
	}
	if err := hd.stop(); err != nil {
		t.Fatalf("hearthd after SIGTERM: %v; want exit status 0", err)
	}
	// hearthd is gone: no third set is on its way.
	if more := sets.sync(b); len(more) != 0 {
		t.Errorf("sets after the second: %v; want exactly 2 in all", more)
	}
	if more := results.sync(b); len(more) != 0 {
		t.Errorf("results after succeeded: %v; want none", more)
	}
}

// Regression (issue 15): after a kill -9 with 12 commands sent and not yet
// confirmed, 9 of 12 resumed commands ended failed/retry_budget_exhausted
// within 2 ms, nothing read and nothing resent, although every device had
// applied its set. Here each device applies its set at once and reports
// it 2 s later (-latency); hearthd is killed as the last set goes out, and
// the next hearthd hears the reports (kept for its MQTT session, or live)
// within the attempts' 10 s window: every command ends succeeded after 1
// attempt, no set is sent again, and none fails for the retry budget
// (min_retries 1, ratio 0.01: one retry in all).
func TestKill9WithTwelveCommandsInFlightEndsEverySucceededWithoutResend(t *testing.T) {
	checkLeaks(t)
	const n = 12
	b := startMosquitto(t)
	hearthdBin, simBin := builtBinaries(t)
	var devs strings.Builder
	for i := range n {
		fmt.Fprintf(&devs, "  light%02d:\n    service: zigbee\n    class: light\n", i)
	}
	cfg := writeInteropConfigDevices(t, b.url(), t.TempDir(),
		"      max_attempts: 3\n      attempt_timeout: 10s\n      base: 100ms\n      cap: 200ms\n"+
			"      budget: {ratio: 0.01, min_retries: 1}", devs.String())

	sets := b.subscribe(0, "zigbee2mqtt/+/set")
	results := b.subscribe(0, "hearth/+/result")
	sim := startProc(t, "hearth-sim", simBin, "-broker", b.url(), "-config", cfg, "-latency", "2s")
	sim.mustLine("hearth-sim ready", 0)
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)

	for i := range n {
		b.pub("-q", "1", "-t", fmt.Sprintf("hearth/light%02d/set", i), "-m", fmt.Sprintf(`{"state":"ON","op_id":"c%02d","ttl":"1h"}`, i))
	}
	for range n {
		if m := sets.next(); m.payload != `{"state":"ON"}` {
			t.Fatalf("set %s; want {\"state\":\"ON\"}", m)
		}
	}
	err := hd.signal(syscall.SIGKILL)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("hearthd after SIGKILL: %v; want killed by SIGKILL", err)
	}

	hd = startProc(t, "hearthd", hearthdBin, "-config", cfg)
	ended := map[string]devices.Result{}
	for len(ended) < n {
		m := results.next()
		var r devices.Result
		if err := json.Unmarshal([]byte(m.payload), &r); err != nil {
			t.Fatalf("result %s: %v", m, err)
		}
		if !r.Status.Terminal() {
			continue // accepted, before the kill or answered again after it
		}
		if _, dup := ended[r.OpID]; dup {
			continue
		}
		ended[r.OpID] = r
		if r.Status != devices.Succeeded || r.Attempts != 1 {
			t.Errorf("%s: %s/%s after %d attempts (%s); want succeeded after 1, its set not sent again",
				r.OpID, r.Status, r.Reason, r.Attempts, r.Detail)
		}
	}
	if err := hd.stop(); err != nil {
		t.Fatalf("hearthd after SIGTERM: %v; want exit status 0", err)
	}
	if more := sets.sync(b); len(more) != 0 {
		t.Errorf("sets after the restart: %v; want none: every device had applied its set", more)
	}
}

// hearthd keeps an MQTT session with Mosquitto (mqtt.session_expiry):
// commands that an automation publishes with mosquitto_pub -q 1 while
// hearthd is down wait in Mosquitto, and every one of them ends when
// hearthd is back, each set once, whether hearthd was stopped, killed
// with SIGKILL, or down while Mosquitto itself restarted (persistence on).
// Before sessions, Mosquitto PUBACKed them and dropped them. An UNLOCK
// without issued_at among them, published last, behind more commands than
// Mosquitto has in flight at once (max_inflight_messages, 20), may be
// minutes old: it is rejected stale_command and never reaches the lock,
// which shows that Hearth's session marker comes back after the whole
// queue, the part Mosquitto held back included.
func TestInteropCommandsSentWhileHearthdIsDownAllEnd(t *testing.T) {
	checkLeaks(t)
	b := startPersistentMosquitto(t)
	hearthdBin, simBin := builtBinaries(t)
	const n = 25
	var devs strings.Builder
	for i := range n {
		fmt.Fprintf(&devs, "  light%02d:\n    service: zigbee\n    class: light\n", i)
	}
	devs.WriteString("  front_door:\n    service: zigbee\n    class: lock\n")
	cfg := filepath.Join(t.TempDir(), "hearth.yaml")
	content := fmt.Sprintf(`prefix: hearth
data_dir: %q
mqtt:
  url: %s
  reconnect: {base: 10ms, cap: 200ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry: {attempt_timeout: 2s, base: 100ms, cap: 500ms}
devices:
%s`, t.TempDir(), b.url(), devs.String())
	if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	sim := startProc(t, "hearth-sim", simBin, "-broker", b.url(), "-config", cfg)
	sim.mustLine("hearth-sim ready", 0)
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)

	rounds := []struct {
		name, state string
		down        func() // takes hearthd down
		meanwhile   func() // after the commands are published
	}{
		{"stopped", "ON", func() {
			if err := hd.stop(); err != nil {
				t.Fatalf("hearthd after SIGTERM: %v", err)
			}
		}, func() {}},
		{"killed", "OFF", func() { hd.signal(syscall.SIGKILL) }, func() {}},
		{"stopped while Mosquitto restarts", "ON", func() {
			if err := hd.stop(); err != nil {
				t.Fatalf("hearthd after SIGTERM: %v", err)
			}
		}, b.restart},
	}
	for r, round := range rounds {
		round.down()
		for i := range n {
			b.pub("-t", fmt.Sprintf("hearth/light%02d/set", i), "-m",
				fmt.Sprintf(`{"state":%q,"op_id":"r%d-%02d","ttl":"1h"}`, round.state, r, i))
		}
		unlock := fmt.Sprintf("r%d-unlock", r)
		b.pub("-t", "hearth/front_door/set", "-m", fmt.Sprintf(`{"state":"UNLOCK","op_id":%q}`, unlock))
		round.meanwhile()
		sets := b.subscribe(0, "zigbee2mqtt/+/set")
		results := b.subscribe(0, "hearth/+/result")
		hd = startProc(t, "hearthd", hearthdBin, "-config", cfg)
		hd.mustLine("session_present=true", 0)

		ended := map[string]devices.Result{}
		for len(ended) < n+1 {
			m := results.next()
			var res devices.Result
			if err := json.Unmarshal([]byte(m.payload), &res); err != nil {
				t.Fatalf("%s: result %s is not JSON: %v", round.name, m, err)
			}
			switch {
			case strings.HasSuffix(res.OpID, "-unlock") && !strings.HasPrefix(res.OpID, fmt.Sprintf("r%d-", r)):
				// The round before's UNLOCK, delivered again after the
				// SIGKILL: a rejection is not stored, so it is refused
				// again.
				if res.Status != devices.Rejected || res.Reason != devices.ReasonStaleCommand {
					t.Errorf("%s: %s answered %s/%s; want rejected/stale_command again", round.name, res.OpID, res.Status, res.Reason)
				}
			case !strings.HasPrefix(res.OpID, fmt.Sprintf("r%d-", r)):
				// A command of the round before, delivered again because
				// the SIGKILL came before its PUBACK left (paho writes
				// them every 50 ms): answered by its op_id with the
				// stored result; the sets below show it did not run again.
				if res.Status != devices.Succeeded {
					t.Errorf("%s: %s answered %s/%s; want its stored succeeded", round.name, res.OpID, res.Status, res.Reason)
				}
			case res.Status.Terminal():
				ended[res.OpID] = res
			}
		}
		for i := range n {
			id := fmt.Sprintf("r%d-%02d", r, i)
			if res, ok := ended[id]; !ok || res.Status != devices.Succeeded || res.Attempts != 1 {
				t.Errorf("%s: %s ended %+v (found %v); want succeeded after 1 attempt", round.name, id, res, ok)
			}
		}
		if res := ended[unlock]; res.Status != devices.Rejected || res.Reason != devices.ReasonStaleCommand {
			t.Errorf("%s: the UNLOCK without issued_at sent while hearthd was down ended %s/%s (%s); want rejected/stale_command", round.name, res.Status, res.Reason, res.Detail)
		}
		got := map[string][]string{}
		for _, m := range sets.sync(b) {
			got[m.topic] = append(got[m.topic], m.payload)
		}
		want := []string{fmt.Sprintf(`{"state":%q}`, round.state)}
		for i := range n {
			topic := fmt.Sprintf("zigbee2mqtt/light%02d/set", i)
			if !slices.Equal(got[topic], want) {
				t.Errorf("%s: %s received %v; want %v, once", round.name, topic, got[topic], want)
			}
		}
		if sets := got["zigbee2mqtt/front_door/set"]; len(sets) != 0 {
			t.Errorf("%s: the lock received %v; want nothing", round.name, sets)
		}
		// The marker came back behind the queue: the backlog is over,
		// and a plain UNLOCK sent now is live and carried out.
		line, _ := hd.out.since(hd.mustLine("the session's backlog is delivered", 0))
		_, count, _ := strings.Cut(line[0], "messages=")
		if kept, err := strconv.Atoi(strings.Fields(count)[0]); err != nil || kept < n+1 {
			t.Errorf("%s: hearthd logged %q; want the backlog to count the %d commands kept while it was down (more for those delivered again)", round.name, line[0], n+1)
		}
		if r == len(rounds)-1 {
			b.pub("-t", "hearth/front_door/set", "-m", `{"state":"UNLOCK","op_id":"live"}`)
			for {
				res, _ := results.result("hearth/front_door/result")
				if res.OpID == "live" && res.Status.Terminal() {
					if res.Status != devices.Succeeded {
						t.Errorf("the live UNLOCK after the backlog: %s/%s (%s); want succeeded", res.Status, res.Reason, res.Detail)
					}
					break
				}
			}
		}
		if t.Failed() {
			return
		}
	}
	if err := hd.stop(); err != nil {
		t.Fatalf("hearthd after SIGTERM: %v; want exit status 0", err)
	}
}

// A second hearthd on a data directory in use exits at once, with status
// 1 and a message that says so, and leaves the first one running.
func TestSecondInstanceExitsClearly(t *testing.T) {
	checkLeaks(t)
	hearthdBin, _ := builtBinaries(t)
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-mqtt-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0"}
	first := startProc(t, "hearthd", hearthdBin, args...)
	first.mustLine(`msg="mqtt connected"`, 0)

	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	var stdout, stderr bytes.Buffer
	second := exec.CommandContext(ctx, hearthdBin, args...)
	second.Stdout, second.Stderr = &stdout, &stderr
	began := time.Now()
	err := second.Run()
	took := time.Since(began)
	if ctx.Err() != nil {
		t.Fatalf("the second hearthd did not exit within %s; stderr:\n%s", interopWait, &stderr)
	}
	t.Logf("the second hearthd exited after %s", took.Round(time.Millisecond))
	if code := exitCode(err); code != 1 {
		t.Errorf("the second hearthd: %v; want exit status 1", err)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	want := fmt.Sprintf("hearthd: data directory %q is in use by another hearthd (lock on %s held)",
		dir, filepath.Join(dir, "hearth.db"))
	if !strings.HasPrefix(last, want) {
		t.Errorf("the second hearthd's last words: %q; want them to start %q", last, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("the second hearthd wrote to stdout: %q", &stdout)
	}

	if first.exited() {
		t.Fatalf("the first hearthd exited too: %v", first.err)
	}
	if err := first.stop(); err != nil {
		t.Fatalf("the first hearthd after SIGTERM: %v; want exit status 0", err)
	}
}

// A config file with mistakes: hearthd refuses to start, exits 1, and
// names the file, line and dotted key of every problem.
func TestBadConfigNamesFileLineKey(t *testing.T) {
	checkLeaks(t)
	hearthdBin, _ := builtBinaries(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(t.TempDir(), "bad.yaml")
	content := fmt.Sprintf(`data_dir: %q
mqtt:
  listen: 127.0.0.1:0
  reconect:
    base: 1s
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry:
      max_attempts: 7
      attempt_timeout: 5
devices:
  hall_light:
    class: lamp
`, dataDir)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, hearthdBin, "-config", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("hearthd did not exit within %s; stderr:\n%s", interopWait, &stderr)
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("hearthd with a bad config: %v; want exit status 1", err)
	}
	// One line per problem, in line order, each file:line: key: message.
	want := []struct{ prefix, says string }{
		{path + ":4: mqtt.reconect: ", "unknown key"},
		{path + ":12: services.zigbee.retry.max_attempts: ", "got 7"},
		{path + ":13: services.zigbee.retry.attempt_timeout: ", "no unit"},
		{path + ":16: devices.hall_light.class: ", `unknown class "lamp"`},
	}
	got := strings.Split(strings.TrimSuffix(strings.TrimPrefix(stderr.String(), "hearthd: "), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("stderr has %d lines; want %d, one per problem:\n%s", len(got), len(want), &stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w.prefix) || !strings.Contains(got[i][len(w.prefix):], w.says) {
			t.Errorf("stderr line %d: %q; want %q followed by a message with %q", i+1, got[i], w.prefix, w.says)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("hearthd wrote to stdout: %q", &stdout)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: %v; want it never created, since hearthd must not start", dataDir, err)
	}
}
