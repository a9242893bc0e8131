package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"testing"
)

// elapsed is the time field of a phase line, which a test cannot know.
var elapsed = regexp.MustCompile(`\[ *[0-9hms]+\]`)

// powerLossStderr runs a small power-loss flood, on pipes to the embedded
// broker, and returns its stderr.
func powerLossStderr(t *testing.T) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runPowerLoss(context.Background(), []string{"-devices", "5", "-base", "50ms", "-cap", "200ms",
		"-timeout", "5s", "-settle", "0s", "-strategy", "equal", "-plot", ""}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("power-loss: %v\nstderr: %s", err, stderr.String())
	}
	return stderr.String()
}

// Not a terminal (a pipe, a file, CI's log): no progress line.
func TestPowerLossPrintsNoProgressWhenStderrIsNotATerminal(t *testing.T) {
	if got := powerLossStderr(t); got != "" {
		t.Errorf("stderr %q, want nothing", got)
	}
}

// On a terminal: a line per phase, headed by the scenario and the time.
func TestPowerLossPrintsItsPhasesOnATerminal(t *testing.T) {
	defer func(was func(io.Writer) bool) { isTerminal = was }(isTerminal)
	isTerminal = func(io.Writer) bool { return true }
	got := elapsed.ReplaceAllString(powerLossStderr(t), "[T]")
	want := "" +
		"power-loss [T] equal: connecting 5 devices\n" +
		"power-loss [T] equal: all 5 devices connected; cutting the clients\n" +
		"power-loss [T] equal: cut; waiting up to 5s for the devices to come back\n" +
		"power-loss [T] equal: all 5 devices back\n"
	if got != want {
		t.Errorf("stderr\n%s\nwant\n%s", got, want)
	}
}

// A file that is not a terminal is not taken for one.
func TestAFileIsNotATerminal(t *testing.T) {
	f, err := createTemp(t)
	if err != nil {
		t.Fatal(err)
	}
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Errorf("isTerminal(file) = %v, isTerminal(buffer) = %v; want false, false", isTerminal(f), isTerminal(&bytes.Buffer{}))
	}
}

func createTemp(t *testing.T) (*os.File, error) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}
