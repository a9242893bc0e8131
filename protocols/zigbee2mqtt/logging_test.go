package zigbee2mqtt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/internal/testbroker"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// TestParseLogging checks what ParseLogging makes of each kind of
// bridge/logging payload: the failed publishes lib/extension/publish.ts
// logs, other log lines, and payloads that are no log line at all.
func TestParseLogging(t *testing.T) {
	known := func(name string) bool { return name == "kitchen" || name == "Hall ' failed: ' light" }
	tests := []struct {
		name    string
		payload string
		want    PublishFailure
		ok      bool
		err     string // a substring of the error; "" for none
	}{
		{"a failed set", `{"level":"error","message":"Publish 'set' 'state' to 'kitchen' failed: 'Error: Delivery failed for '0x00158d0001' (MAC_NO_ACK)'","namespace":"z2m"}`,
			PublishFailure{Type: "set", Attribute: "state", Entity: "kitchen", Reason: "Error: Delivery failed for '0x00158d0001' (MAC_NO_ACK)"}, true, ""},
		{"a failed get", `{"level":"error","message":"Publish 'get' 'state' to 'kitchen' failed: 'Timeout'","namespace":"z2m"}`,
			PublishFailure{Type: "get", Attribute: "state", Entity: "kitchen", Reason: "Timeout"}, true, ""},
		{"the log file's namespace prefix", `{"level":"error","message":"z2m: Publish 'set' 'position' to 'kitchen' failed: 'x'"}`,
			PublishFailure{Type: "set", Attribute: "position", Entity: "kitchen", Reason: "x"}, true, ""},
		{"a name holding the separator, known", `{"level":"error","message":"Publish 'set' 'state' to 'Hall ' failed: ' light' failed: 'boom'"}`,
			PublishFailure{Type: "set", Attribute: "state", Entity: "Hall ' failed: ' light", Reason: "boom"}, true, ""},
		{"an unknown name: the first split", `{"level":"error","message":"Publish 'set' 'state' to 'garden' failed: 'a' failed: 'b'"}`,
			PublishFailure{Type: "set", Attribute: "state", Entity: "garden", Reason: "a' failed: 'b"}, true, ""},
		{"another level", `{"level":"info","message":"Publish 'set' 'state' to 'kitchen' failed: 'x'","namespace":"z2m"}`, PublishFailure{}, false, ""},
		{"another error", `{"level":"error","message":"Entity 'kitchen' is unknown","namespace":"z2m"}`, PublishFailure{}, false, ""},
		{"no converter", `{"level":"error","message":"No converter available for 'set' 'colour' (red)"}`, PublishFailure{}, false, ""},
		{"another type", `{"level":"error","message":"Publish 'toggle' 'state' to 'kitchen' failed: 'x'"}`, PublishFailure{}, false, ""},
		{"no closing quote", `{"level":"error","message":"Publish 'set' 'state' to 'kitchen' failed: 'x"}`, PublishFailure{}, false, ""},
		{"an empty name", `{"level":"error","message":"Publish 'set' 'state' to '' failed: 'x'"}`, PublishFailure{}, false, ""},
		{"not JSON", `Publish 'set' 'state' to 'kitchen' failed: 'x'`, PublishFailure{}, false, "not a JSON object"},
		{"a JSON array", `["error"]`, PublishFailure{}, false, "not a JSON object"},
		{"no level", `{"message":"Publish 'set' 'state' to 'kitchen' failed: 'x'"}`, PublishFailure{}, false, `lacks a string "message" or "level"`},
		{"a number for a message", `{"level":"error","message":3}`, PublishFailure{}, false, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseLogging([]byte(tt.payload), known)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("ParseLogging() error = %v; want %q", err, tt.err)
			}
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseLogging() = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzParseLogging: any payload gives a failure, nothing, or a clear
// error, never a panic; a failure always names a type, an attribute and
// an entity that its message holds.
func FuzzParseLogging(f *testing.F) {
	for _, s := range []string{
		`{"level":"error","message":"Publish 'set' 'state' to 'kitchen' failed: 'Error: Timeout'","namespace":"z2m"}`,
		`{"level":"error","message":"z2m: Publish 'get' 'state' to 'a' failed: ''"}`,
		`{"level":"info","message":"x"}`, `{}`, `null`, `"x"`, `{"level":"error","message":"Publish '' '' to '' failed: ''"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		got, ok, err := ParseLogging(p, func(name string) bool { return name == "kitchen" })
		switch {
		case err != nil && (ok || err.Error() == ""):
			t.Fatalf("ParseLogging(%q) = ok %v with error %q", p, ok, err)
		case ok && (got.Type != "set" && got.Type != "get" || got.Attribute == "" || got.Entity == ""):
			t.Fatalf("ParseLogging(%q) = %+v: a failure without type, attribute or entity", p, got)
		case ok && !strings.Contains(string(p), "failed: "):
			t.Fatalf("ParseLogging(%q) = %+v from a message without \"failed: \"", p, got)
		}
	})
}

// failureSink is the test's sink that also takes failed sets.
type failureSink struct {
	*sink
	failed chan error
}

func (s *failureSink) SendFailed(device, attribute string, err error) {
	s.failed <- fmt.Errorf("%s %s: %w", device, attribute, err)
}

// A failed set that the bridge's account logged on bridge/logging reaches
// the sink's SendFailed, as a *SetFailedError; a forged one, a retained
// one, a failed get and one for a device Hearth does not command do not.
func TestTrustedFailedSetReachesTheSink(t *testing.T) {
	addr := startBroker(t)
	conn := mqtt.New(mqtt.Options{URL: "tcp://" + addr, ClientID: fmt.Sprintf("hearth-%d", seq.Add(1))})
	a := New(conn, Options{Service: "z2m", Devices: testDevices, Publisher: "zigbee", StampProperty: "hearth-username"})
	s := &failureSink{sink: newSink(), failed: make(chan error, 8)}
	if err := a.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	runConn(t, conn)
	p := testbroker.NewStampedPublisher(t, addr)
	line := func(verb, name string) string {
		return fmt.Sprintf(`{"level":"error","message":"Publish '%s' 'state' to '%s' failed: 'Error: Delivery failed (MAC_NO_ACK)'","namespace":"z2m"}`, verb, name)
	}
	p.Publish(t, "zigbee2mqtt/bridge/logging", line("set", "front door"), "mallory") // forged
	p.Publish(t, "zigbee2mqtt/bridge/logging", line("get", "front door"), "zigbee")  // a read
	p.Publish(t, "zigbee2mqtt/bridge/logging", line("set", "garden"), "zigbee")      // not ours
	p.Publish(t, "zigbee2mqtt/bridge/logging", `{"level":"error","message":`, "zigbee")
	p.Publish(t, "zigbee2mqtt/bridge/logging", line("set", "front door"), "zigbee")
	select {
	case err := <-s.failed:
		var sf *SetFailedError
		if !errors.As(err, &sf) || !strings.HasPrefix(err.Error(), "door state: ") || sf.Failure.Entity != "front door" || sf.Failure.Reason != "Error: Delivery failed (MAC_NO_ACK)" {
			t.Fatalf("SendFailed: %v (%+v); want door's failed set of state, as a *SetFailedError", err, sf)
		}
	case <-time.After(deadline):
		t.Fatal("the failed set never reached SendFailed")
	}
	if got := a.Untrusted(); got != 1 {
		t.Errorf("Untrusted() = %d; want 1 (the forged log line)", got)
	}
	// Nothing else came: a report after it is the next call.
	p.Publish(t, "zigbee2mqtt/front door", `{"state":"LOCK"}`, "zigbee")
	if c := s.next(t); c.kind != "report" {
		t.Errorf("next call %+v; want the report", c)
	}
	select {
	case err := <-s.failed:
		t.Errorf("a second failure reached the sink: %v", err)
	default:
	}
}
