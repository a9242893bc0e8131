package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// Two hearthd with one mqtt.client_id on Debian's Mosquitto, which
// closes the connection it gives to the other without a DISCONNECT: one of
// them logs the conflict at ERROR, as a configuration error, within a
// minute, /readyz of each says so in its mqtt check once it has seen it,
// and hearth/bridge/state then gets no more than about one message per
// ConflictBackoff. Timings are shortened (reconnect base 100 ms, cap 1 s;
// ShortConnection 2 s, ConflictBackoff 3 s); protocols/mqtt's
// TestConnTwinOnMosquittoIsAConflictWithinAMinute has the production ones.
// Before, the twins took the session from each other every few
// milliseconds here, for ever, and nothing was logged or shown.
func TestInteropTwinHearthdOnMosquittoReportTheConflict(t *testing.T) {
	checkLeaks(t)
	b := startMosquitto(t)
	const backoff = 3 * time.Second
	type twin struct {
		name string
		d    *daemon
		log  *lineLog
	}
	startTwin := func(name string) *twin {
		t.Helper()
		text := fmt.Sprintf(`prefix: hearth
data_dir: %q
mqtt:
  url: %s
  client_id: hearth-twin
  reconnect: {base: 100ms, cap: 1s}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
devices:
  lamp:
    service: zigbee
    class: light
`, t.TempDir(), b.url())
		path := filepath.Join(t.TempDir(), "hearth.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(path, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		openWithoutPrincipals(cfg)
		tw := &twin{name: name, log: newLineLog()}
		tw.d, err = start(cfg, deps{
			logger: slog.New(slog.NewTextHandler(tw.log, nil)),
			connOptions: func(o *mqtt.Options) {
				o.ShortConnection = 2 * time.Second
				o.ConflictBackoff = backoff
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			tw.d.stop()
			if t.Failed() {
				lines, _ := tw.log.since(0)
				for _, l := range lines {
					t.Logf("%s: %s", name, l)
				}
			}
		})
		return tw
	}

	type stateMsg struct {
		at      time.Time
		payload string
	}
	states := make(chan stateMsg, 4096)
	_, watch := connect(t, b.url(), "watch-twins", login{})
	mustToken(t, watch.Subscribe("hearth/bridge/state", 1, func(_ paho.Client, m paho.Message) {
		states <- stateMsg{time.Now(), string(m.Payload())}
	}))

	a := startTwin("a")
	waitClosed(t, a.d.conn.Up(), "a connected")
	began := time.Now()
	bb := startTwin("b")
	twins := []*twin{a, bb}

	// The first report, in either log.
	const conflictLine = `msg="mqtt client ID conflict, a configuration error; backing off"`
	first, at := awaitEither(t, twins[0].log, twins[1].log, conflictLine, time.Minute)
	detected := at.Sub(began)
	t.Logf("%s reported the conflict %v after the second hearthd started", twins[first].name, detected.Round(time.Millisecond))
	if detected > time.Minute {
		t.Errorf("the conflict was reported %v after the second hearthd started; want within a minute", detected)
	}
	readyzSaysConflict := func(tw *twin) {
		t.Helper()
		status, body := get(t, "http://"+tw.d.httpAddr()+"/readyz")
		var r health.Report
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: /readyz: %d %s", tw.name, status, body)
		}
		if status != http.StatusServiceUnavailable || !strings.Contains(r.Checks["mqtt"], `another client uses client ID "hearth-twin"`) {
			t.Errorf("%s: /readyz after the conflict was logged: %d %s; want 503 with the conflict in the mqtt check", tw.name, status, body)
		}
	}
	readyzSaysConflict(twins[first])

	// After the report: at most about one birth (or will) per
	// ConflictBackoff. The first may be the birth of the connection that
	// threw the reporter off.
	before := 0
	var after []stateMsg
	for len(after) < 4 {
		select {
		case m := <-states:
			if m.at.Before(at) {
				before++
			} else {
				after = append(after, m)
			}
		case <-time.After(3*backoff + eventWait):
			t.Fatalf("hearth/bridge/state: %d messages after the report; want the twins to go on taking turns, each after its ConflictBackoff", len(after))
		}
	}
	span := after[len(after)-1].at.Sub(at)
	var seen []string
	for _, m := range after {
		seen = append(seen, fmt.Sprintf("%s at +%v", m.payload, m.at.Sub(at).Round(time.Millisecond)))
	}
	t.Logf("hearth/bridge/state: %d messages before the report, then %s", before, strings.Join(seen, ", "))
	if want := time.Duration(len(after)-2) * backoff; span < want {
		t.Errorf("hearth/bridge/state got %d messages within %v of the report; want them spread over at least %v: one per ConflictBackoff (%v), after the first",
			len(after), span, want, backoff)
	}

	// The other twin, thrown off after ConflictBackoff, sees it too.
	other := twins[1-first]
	if _, ok := other.log.await(conflictLine, 0, 2*backoff+eventWait); !ok {
		t.Fatalf("%s did not report the conflict", other.name)
	}
	readyzSaysConflict(other)
}

// awaitEither waits for a line containing substr in x or y, and returns
// which (0 or 1) and when it was seen.
func awaitEither(t *testing.T, x, y *lineLog, substr string, within time.Duration) (int, time.Time) {
	t.Helper()
	timeout := time.After(within)
	for {
		lx, cx := x.since(0)
		ly, cy := y.since(0)
		for i, lines := range [][]string{lx, ly} {
			for _, l := range lines {
				if strings.Contains(l, substr) {
					return i, time.Now()
				}
			}
		}
		select {
		case <-cx:
		case <-cy:
		case <-timeout:
			t.Fatalf("no line with %q in either log within %v", substr, within)
		}
	}
}

// await waits up to within for a line containing substr, from index from
// on, and returns its index.
func (l *lineLog) await(substr string, from int, within time.Duration) (int, bool) {
	timeout := time.After(within)
	for {
		lines, changed := l.since(from)
		for i, s := range lines {
			if strings.Contains(s, substr) {
				return from + i, true
			}
		}
		from += len(lines)
		select {
		case <-changed:
		case <-timeout:
			return 0, false
		}
	}
}
