package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// deadServer is newServer holding the dead letters of a sleepy
// thermostat and a flaky light.
func deadServer(t *testing.T) *server {
	t.Helper()
	srv := newServer(t, "")
	op := func(id, device string, status devices.Status, reason devices.Reason, minutes int, target devices.Target) devices.Op {
		return devices.Op{OpID: id, Device: device, Target: target, Seq: 1, AcceptedAt: t0, Deadline: t0.Add(time.Hour),
			Status: status, Reason: reason, UpdatedAt: t0.Add(time.Duration(minutes) * time.Minute)}
	}
	heat := func(c float64) devices.Target { return devices.Target{"occupied_heating_setpoint": c} }
	light := op("op-3", "hall_light", devices.Failed, devices.ReasonTimeout, 30, devices.Target{"state": "ON", "brightness": float64(128)})
	light.Attempts = 3
	light.Detail = "no report within 5s after attempt 3; the bridge says the device is unreachable since 19:12"
	err := srv.store.AddDeadLetters(
		op("op-1", "thermostat", devices.Superseded, devices.ReasonNewerCommand, 10, heat(21)), // 1
		op("op-2", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 60, heat(18)),      // 2
		light, // 3
		op("op-4", "thermostat", devices.Failed, devices.ReasonTimeout, 90, heat(19.5)), // 4
	)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestDeadLettersPrintsTheNewestAsATable(t *testing.T) {
	srv := deadServer(t)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "deadletters")
	want := "" +
		"SEQ  UPDATED_AT            DEVICE      OP_ID  STATUS      REASON         ATTEMPTS  TARGET                              DETAIL\n" +
		"1    2026-11-29T19:10:00Z  thermostat  op-1   superseded  newer_command  0         {\"occupied_heating_setpoint\":21}    -\n" +
		"2    2026-11-29T20:00:00Z  thermostat  op-2   expired     ttl_elapsed    0         {\"occupied_heating_setpoint\":18}    -\n" +
		"3    2026-11-29T19:30:00Z  hall_light  op-3   failed      timeout        3         {\"brightness\":128,\"state\":\"ON\"}     no report within 5s after attempt 3; the bridge says the de…\n" +
		"4    2026-11-29T20:30:00Z  thermostat  op-4   failed      timeout        0         {\"occupied_heating_setpoint\":19.5}  -\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", code, stderr, stdout, want)
	}
}

func TestDeadLettersLimitShowsTheNewestInOrder(t *testing.T) {
	srv := deadServer(t)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "deadletters", "-limit", "2")
	if got := seqs(stdout); code != 0 || strings.Join(got, ",") != "3,4" || stderr != "" {
		t.Errorf("exit %d, seqs %v, stderr %q; want 0, [3 4], no stderr", code, got, stderr)
	}
}

func TestDeadLettersFilters(t *testing.T) {
	srv := deadServer(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-device", "hall_light"}, "3"},
		{[]string{"-status", "failed"}, "3,4"},
		{[]string{"-reason", "timeout", "-device", "thermostat"}, "4"},
		{[]string{"-status", "expired", "-reason", "ttl_elapsed"}, "2"},
		{[]string{"-since", "2026-11-29T20:00:00Z"}, "2,4"},
		{[]string{"-device", "thermostat", "-limit", "2"}, "2,4"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", srv.URL, "deadletters"}, tt.args...)...)
		if got := strings.Join(seqs(stdout), ","); code != 0 || got != tt.want {
			t.Errorf("deadletters %v: exit %d, seqs %s, stderr %q; want 0, %s", tt.args, code, got, stderr, tt.want)
		}
	}
	code, stdout, _ := hearthctl("-addr", srv.URL, "deadletters", "-device", "nope")
	if code != 0 || stdout != "no dead letters\n" {
		t.Errorf("no match: exit %d, stdout %q; want 0, \"no dead letters\\n\"", code, stdout)
	}
}

func TestDeadLettersSinceADurationCountsBackFromNow(t *testing.T) {
	srv := deadServer(t)
	for _, tt := range []struct{ since, want string }{
		{"30m", "2,4"},  // since t0+60m: inclusive
		{"1h", "2,3,4"}, // since t0+30m: 3 ended then
		{"1d", "1,2,3,4"},
	} {
		code, stdout, stderr := hearthctlAt(t0.Add(90*time.Minute), "-addr", srv.URL, "deadletters", "-since", tt.since)
		if got := strings.Join(seqs(stdout), ","); code != 0 || got != tt.want {
			t.Errorf("-since %s: exit %d, seqs %s, stderr %q; want 0, %s", tt.since, code, got, stderr, tt.want)
		}
	}
}

func TestDeadLettersJSONPrintsOneEntryPerLine(t *testing.T) {
	srv := deadServer(t)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "deadletters", "-json", "-limit", "1")
	want := `{"seq":4,"op_id":"op-4","device":"thermostat","target":{"occupied_heating_setpoint":19.5},"accepted_at":"2026-11-29T19:00:00Z","deadline":"2026-11-29T20:00:00Z","status":"failed","reason":"timeout","attempts":0,"updated_at":"2026-11-29T20:30:00Z","op_seq":1}` + "\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant 0,\n%s", code, stderr, stdout, want)
	}
}

func TestDeadLettersAfterPagesForward(t *testing.T) {
	srv := deadServer(t)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "deadletters", "-after", "1", "-limit", "2")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "2,3" || stderr != "more may follow: hearthctl deadletters -after 3\n" {
		t.Errorf("first page: exit %d, seqs %s, stderr %q; want 0, 2,3, a hint to go on after 3", code, got, stderr)
	}
	code, stdout, stderr = hearthctl("-addr", srv.URL, "deadletters", "-after", "3", "-limit", "2")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "4" || stderr != "" {
		t.Errorf("last page: exit %d, seqs %s, stderr %q; want 0, 4, no stderr", code, got, stderr)
	}
	code, stdout, _ = hearthctl("-addr", srv.URL, "deadletters", "-after", "0", "-limit", "1")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "1" {
		t.Errorf("-after 0: exit %d, seqs %s; want the oldest, 1", code, got)
	}
}

func TestDeadLettersBadStatusIsHearthdsError(t *testing.T) {
	srv := deadServer(t)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "deadletters", "-status", "succeeded")
	want := `hearthctl: hearthd answered 400 Bad Request: invalid_parameter: status: "succeeded" is not a dead letter's status (failed, expired or superseded)` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, %q", code, stdout, stderr, want)
	}
}

func TestDeadLettersUsageMistakesExit2WithoutAsking(t *testing.T) {
	addr := closedAddr(t) // a request would exit 1
	tests := []struct {
		args       []string
		code       int
		wantStderr string
	}{
		{[]string{"deadletters", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"deadletters", "-after", "x"}, 2, `invalid value "x" for flag -after`},
		{[]string{"deadletters", "-since", "yesterday"}, 2, `hearthctl deadletters: -since "yesterday": want an RFC 3339 time`},
		{[]string{"deadletters", "thermostat"}, 2, `hearthctl deadletters: unexpected argument "thermostat"`},
		{[]string{"deadletters", "-h"}, 0, "usage: hearthctl deadletters"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", addr}, tt.args...)...)
		if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("hearthctl %v: exit %d, stdout %q, stderr %q; want exit %d and %q in stderr", tt.args, code, stdout, stderr, tt.code, tt.wantStderr)
		}
	}
}

func TestTruncateCutsRunesNotBytes(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"abcde", 5, "abcde"},
		{"abcdef", 5, "abcd…"},
		{"ééééééé", 4, "ééé…"},
	} {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
