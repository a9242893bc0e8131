package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// splitAt removes the "at:" line of a printed result and returns the
// rest and the time it gave, which a test cannot know exactly.
func splitAt(t *testing.T, out string) (string, time.Time) {
	t.Helper()
	var rest []string
	var at time.Time
	for _, l := range strings.SplitAfter(out, "\n") {
		if v, ok := strings.CutPrefix(l, "at:       "); ok {
			var err error
			if at, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(v)); err != nil {
				t.Errorf("at: %v", err)
			}
			continue
		}
		rest = append(rest, l)
	}
	return strings.Join(rest, ""), at
}

// assertRecent fails t unless at is between before and now.
func assertRecent(t *testing.T, at, before time.Time) {
	t.Helper()
	if at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("at %v, want between %v and now", at, before)
	}
}

func TestSendWaitPrintsTheConfirmedResult(t *testing.T) {
	addr := demoAddr(t)
	before := time.Now()
	code, stdout, stderr := hearthctl("-addr", addr, "send", "kitchen_light", `{"state":"ON","brightness":77,"op_id":"cli-send-wait"}`, "-wait", "10s")
	got, at := splitAt(t, stdout)
	want := "" +
		"op_id:    cli-send-wait\n" +
		"device:   kitchen_light\n" +
		"status:   succeeded\n" +
		"attempts: 1\n" +
		`target:   {"brightness":77,"state":"ON"}` + "\n" +
		`state:    {"brightness":77,"color_temp":250,"state":"ON"}` + "\n"
	if code != 0 || got != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", code, stderr, got, want)
	}
	assertRecent(t, at, before)

	// The same op_id again: answered from the store, not sent again.
	code, stdout, _ = hearthctl("-addr", addr, "send", "-json", "kitchen_light", `{"state":"ON","brightness":77,"op_id":"cli-send-wait"}`)
	if code != 0 || !strings.HasPrefix(stdout, `{"op_id":"cli-send-wait","device":"kitchen_light","status":"succeeded","attempts":1,`) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("repeated: exit %d, stdout %q; want 0 and the succeeded result on one line", code, stdout)
	}
}

func TestSendWithoutWaitPrintsAcceptedAndGetFollowsIt(t *testing.T) {
	addr := demoAddr(t)
	code, stdout, stderr := hearthctl("-addr", addr, "send", "coffee_maker", `{"state":"ON","op_id":"cli-send-get"}`)
	got, _ := splitAt(t, stdout)
	want := "" +
		"op_id:    cli-send-get\n" +
		"device:   coffee_maker\n" +
		"status:   accepted\n" +
		"attempts: 0\n" +
		`target:   {"state":"ON"}` + "\n"
	if code != 0 || got != want || stderr != "" {
		t.Errorf("send: exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", code, stderr, got, want)
	}
	code, stdout, stderr = hearthctl("-addr", addr, "get", "cli-send-get", "-wait", "10s")
	got, _ = splitAt(t, stdout)
	want = "" +
		"op_id:    cli-send-get\n" +
		"device:   coffee_maker\n" +
		"status:   succeeded\n" +
		"attempts: 1\n" +
		`target:   {"state":"ON"}` + "\n" +
		`state:    {"state":"ON"}` + "\n"
	if code != 0 || got != want || stderr != "" {
		t.Errorf("get -wait: exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", code, stderr, got, want)
	}
}

// A command that ends otherwise than succeeded exits 1 and says how it
// ended; so does an op_id hearthd does not know, with its error.
func TestSendThatDoesNotSucceedExits1AndSaysHow(t *testing.T) {
	addr := demoAddr(t)
	tests := []struct {
		args       []string
		status     string
		wantStderr string
	}{
		{[]string{"send", "hall_light", `{"state":"TOGGLE","op_id":"cli-toggle"}`, "-wait", "5s"}, "rejected",
			"hearthctl: hall_light: the command cli-toggle ended rejected (relative_command: state TOGGLE is a relative change; send ON or OFF)\n"},
		{[]string{"send", "attic_fan", `{"state":"ON","op_id":"cli-unknown"}`}, "rejected",
			"hearthctl: attic_fan: the command cli-unknown ended rejected (unknown_device: no device \"attic_fan\" in the configuration)\n"},
		{[]string{"send", "front_door", `{"state":"LOCK","op_id":"cli-late","issued_at":"2020-01-01T00:00:00Z"}`, "-wait", "5s"}, "expired",
			"hearthctl: front_door: the command cli-late ended expired (ttl_elapsed: the TTL had passed when the command arrived (issued_at + ttl is in the past))\n"},
		{[]string{"get", "cli-late"}, "expired",
			"hearthctl: front_door: the command cli-late ended expired (ttl_elapsed: the TTL had passed when the command arrived (issued_at + ttl is in the past))\n"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", addr}, tt.args...)...)
		if code != 1 || !strings.Contains(stdout, "status:   "+tt.status+"\n") || stderr != tt.wantStderr {
			t.Errorf("hearthctl %v: exit %d, stdout\n%s\nstderr %q; want exit 1, status %s, stderr %q", tt.args, code, stdout, stderr, tt.status, tt.wantStderr)
		}
	}
	code, stdout, stderr := hearthctl("-addr", addr, "get", "cli-never-sent")
	want := `hearthctl: hearthd answered 404 Not Found: unknown_op: no command with op_id "cli-never-sent" is stored (rejected commands never are; ended ones are kept for 7 days)` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("get unknown: exit %d, stdout %q, stderr %q; want 1, nothing, %q", code, stdout, stderr, want)
	}
}

// silentBridge takes every command and never reports: a command stays
// under way until its attempt times out.
type silentBridge struct{}

func (silentBridge) Send(context.Context, devices.Device, devices.Target) error { return nil }
func (silentBridge) Read(context.Context, devices.Device, devices.Target) error { return nil }

type noPublish struct{}

func (noPublish) Publish(context.Context, string, byte, bool, []byte) error { return nil }

// newSilentServer is hearthd's command API (package api over a real
// dispatcher and store, behind Authenticate with no principals) for one
// light whose bridge never reports.
func newSilentServer(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	waiter := &api.Waiter{}
	disp, err := dispatcher.New(dispatcher.Options{
		Services: []dispatcher.Service{{Name: "zigbee", Bridge: silentBridge{},
			Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: time.Minute}}},
		Devices:   []dispatcher.Device{{Device: devices.Device{ID: "hall_light", Service: "zigbee", Class: devices.Light}, TTL: time.Minute}},
		Journal:   st,
		Publisher: noPublish{},
		OnResult:  waiter.Notify,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); disp.Run(ctx) }()
	mux := http.NewServeMux()
	api.RegisterCommands(mux, api.Commands{Commander: disp, Ops: st, Waiter: waiter})
	srv := httptest.NewServer(api.Authenticate(nil, mux))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv
}

// A command still under way when -wait passes exits 3, saying how to
// follow it; without -wait, accepted is a fine answer (exit 0).
func TestSendWaitThatPassesExits3(t *testing.T) {
	srv := newSilentServer(t)
	start := time.Now()
	code, stdout, stderr := hearthctl("-addr", srv.URL, "send", "hall_light", `{"state":"ON","op_id":"cli-slow"}`, "-wait", "300ms")
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("send -wait 300ms answered after %v", took)
	}
	wantStderr := "hearthctl: hall_light: the command cli-slow is still accepted; follow it with: hearthctl get cli-slow -wait 1m\n"
	if code != exitPending || !strings.Contains(stdout, "status:   accepted\n") || stderr != wantStderr {
		t.Errorf("exit %d, stdout\n%s\nstderr %q; want exit 3, status accepted, stderr %q", code, stdout, stderr, wantStderr)
	}
	code, _, stderr = hearthctl("-addr", srv.URL, "get", "cli-slow")
	if code != 0 || stderr != "" {
		t.Errorf("get without -wait: exit %d, stderr %q; want 0", code, stderr)
	}
	code, _, _ = hearthctl("-addr", srv.URL, "get", "-wait", "200ms", "cli-slow")
	if code != exitPending {
		t.Errorf("get -wait 200ms: exit %d; want 3", code)
	}
}

func TestSendReadsThePayloadFromStdin(t *testing.T) {
	srv := newSilentServer(t)
	var stdout, stderr strings.Builder
	c := &cli{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }, now: time.Now,
		client: http.DefaultClient, stdin: strings.NewReader(`{"state":"OFF","op_id":"cli-stdin"}`)}
	code := c.run([]string{"-addr", srv.URL, "send", "hall_light", "-"})
	got, _ := splitAt(t, stdout.String())
	want := "op_id:    cli-stdin\ndevice:   hall_light\nstatus:   accepted\nattempts: 0\n" + `target:   {"state":"OFF"}` + "\n"
	if code != 0 || got != want {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant 0,\n%s", code, stderr.String(), got, want)
	}
}

func TestSendAndGetUsageMistakes(t *testing.T) {
	addr := closedAddr(t) // a request would exit 1
	tests := []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"send"}, "hearthctl send: want DEVICE and PAYLOAD, got 0 arguments (hearthctl send -h)"},
		{[]string{"send", "hall_light"}, "hearthctl send: want DEVICE and PAYLOAD, got 1 arguments"},
		{[]string{"send", "hall_light", "ON", "OFF"}, "got 3 arguments"},
		{[]string{"send", "hall_light", "ON", "-wait", "soon"}, `invalid value "soon" for flag -wait`},
		{[]string{"send", "hall_light", "ON", "-wait", "-1s"}, "hearthctl send: -wait -1s: want 0 or more"},
		{[]string{"get"}, "hearthctl get: want one OP_ID, got 0 arguments"},
		{[]string{"get", "a", "b"}, "hearthctl get: want one OP_ID, got 2 arguments"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", addr}, tt.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("hearthctl %v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, stdout, stderr, tt.wantStderr)
		}
	}
}
