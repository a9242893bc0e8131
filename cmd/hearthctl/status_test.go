package main

import (
	"testing"
	"time"
)

// A hearthd that does not answer a part (here: an API server without
// /readyz, /api/v1/devices and /api/v1/ops) gets every part it does
// answer printed, the others said, and exit 1.
func TestStatusSaysWhatItCannotReadAndExits1(t *testing.T) {
	srv := newServer(t, "")
	code, stdout, stderr := hearthctlAt(t0.Add(time.Hour), "-addr", srv.URL, "status")
	want := "" +
		"hearthd:      unexpected answer to /readyz: 404 Not Found: 404 page not found\n" +
		"breakers:     zigbee closed; cloud OPEN until 2026-11-29T19:00:30Z (2 trips)\n" +
		"devices:      cannot be read: 404 Not Found: 404 page not found\n" +
		"pending:      cannot be read: 404 Not Found: 404 page not found\n" +
		"failures:     cannot be read: 404 Not Found: 404 page not found\n" +
		"dead letters: 0 since 2026-11-28T20:00:00Z (hearthctl deadletters -since 24h)\n"
	if code != 1 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 1, stdout\n%s", code, stderr, stdout, want)
	}
}
