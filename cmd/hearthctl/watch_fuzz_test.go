package main

import (
	"strings"
	"testing"
	"time"
)

// Whatever hearthd (or something posing as it) streams, watch reads it
// without panicking and prints each event it finds on one line.
func FuzzEventStream(f *testing.F) {
	f.Add("event: result\ndata: {\"op_id\":\"a\",\"device\":\"d\",\"status\":\"succeeded\",\"attempts\":1,\"at\":\"2026-12-03T14:00:00Z\"}\n\n")
	f.Add(": keepalive\n\nevent: state\ndata: {\"device\":\"x\",\ndata: \"state\":null}\n\n")
	f.Add("event: breaker\ndata: {\"service\":1}\n\nevent: availability\ndata: []\n\n")
	f.Add("data: not json\r\n\r\nevent: dropped\ndata:\n\n")
	f.Add("event: result\ndata: {\"device\":\"a\\nb\",\"op_id\":\"x\\r\",\"status\":\"failed\"}\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
		err := readEvents(strings.NewReader(stream), func(ev sse) bool {
			line := eventLine(ev, now)
			if strings.ContainsAny(line, "\r\n") {
				t.Errorf("event %q printed on more than one line: %q", ev.data, line)
			}
			var sb strings.Builder
			printEventJSON(&sb, ev)
			if strings.Count(sb.String(), "\n") != 1 {
				t.Errorf("event %q as JSON: %q, want one line", ev.data, sb.String())
			}
			return true
		})
		if err != nil && !strings.Contains(err.Error(), "token too long") {
			t.Errorf("readEvents: %v", err)
		}
	})
}
