package mqtt

// Debian's Mosquitto as the broker, for what it does differently from the
// embedded one: it closes the connection of a client whose session
// another client takes over without sending it a DISCONNECT.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mosquitto is a Mosquitto broker process on a loopback port.
type mosquitto struct {
	addr string // host:port
	log  *syncBuffer
}

func (m *mosquitto) url() string { return "tcp://" + m.addr }

// startMosquitto runs Mosquitto, without persistence, on a free loopback
// port until the test ends, and returns once it says it is running. It
// skips the test when Mosquitto is not installed, and fails it then under
// CI (CI set), where .ci/run installs it.
func startMosquitto(t *testing.T) *mosquitto {
	t.Helper()
	bin := "/usr/sbin/mosquitto"
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("mosquitto"); err != nil {
			msg := "Mosquitto is not installed; install the Debian package mosquitto, as .ci/run does"
			if os.Getenv("CI") != "" {
				t.Fatal(msg + " (CI is set: this test must run there)")
			}
			t.Skip(msg)
		}
	}
	for try := 1; ; try++ {
		port := freePort(t)
		conf := filepath.Join(t.TempDir(), "mosquitto.conf")
		content := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type all\n", port)
		if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		m := &mosquitto{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: newSyncBuffer()}
		cmd := exec.Command(bin, "-c", conf)
		cmd.Stdout, cmd.Stderr = m.log, m.log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(deadline):
				cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("mosquitto's log:\n%s", m.log.String())
			}
		})
		if m.log.waitFor(" running", exited) {
			return m
		}
		if try == 3 {
			t.Fatalf("mosquitto did not start on a free port in %d tries:\n%s", try, m.log.String())
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a process's output, which tests wait on.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output contains s, and reports false if exited
// closes or the deadline passes first.
func (b *syncBuffer) waitFor(s string, exited <-chan struct{}) bool {
	timeout := time.After(deadline)
	for {
		b.mu.Lock()
		found, changed := strings.Contains(b.buf.String(), s), b.changed
		b.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-changed:
		case <-exited:
			return strings.Contains(b.String(), s)
		case <-timeout:
			return false
		}
	}
}
