package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The commands that act (send, get, devices, watch, status) are tested
// against a real hearthd: this tree's, built once per test binary and run
// with -demo (the sample configuration's six Zigbee2MQTT devices and its
// Tasmota plug played by the simulator inside hearthd, the embedded broker
// and the HTTP API on free loopback ports, no authentication). The demo
// first sends its own commands and takes the Zigbee2MQTT bridge offline
// and back; the tests start once it has said "Try one yourself", when the
// breaker is closed again. The token handling these commands share with
// the listings is tested with newServer (main_test.go).

func TestMain(m *testing.M) {
	code := m.Run()
	stopDemo()
	os.Exit(code)
}

var demo struct {
	once   sync.Once
	dir    string    // the binary and the data directory
	cmd    *exec.Cmd // hearthd -demo
	done   chan struct{}
	stderr *strings.Builder
	addr   string // http://127.0.0.1:port
	err    error
}

// demoAddr returns the HTTP address of the running demo hearthd, starting
// it the first time.
func demoAddr(t *testing.T) string {
	t.Helper()
	demo.once.Do(func() { demo.addr, demo.err = startDemo() })
	if demo.err != nil {
		t.Fatalf("hearthd -demo: %v", demo.err)
	}
	return demo.addr
}

func startDemo() (string, error) {
	dir, err := os.MkdirTemp("", "hearthctl-demo-")
	if err != nil {
		return "", err
	}
	demo.dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/hearthd")
	build.Dir = filepath.Join("..", "..") // the module root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(dir, "hearthd"), "-demo", "-data-dir", filepath.Join(dir, "data"),
		"-mqtt-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	demo.stderr = &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: demo.stderr}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	demo.cmd, demo.done = cmd, make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		defer close(demo.done)
		sc := bufio.NewScanner(stdout)
		addrRE := regexp.MustCompile(`HTTP (http://127\.0\.0\.1:\d+)`)
		addr := ""
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				addr = m[1]
			}
			if strings.HasPrefix(sc.Text(), "Try one yourself") {
				select {
				case ready <- addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	select {
	case addr := <-ready:
		if addr == "" {
			return "", fmt.Errorf("no HTTP address in its output")
		}
		return addr, nil
	case <-demo.done:
		return "", fmt.Errorf("exited before its demo ended: %v\n%s", cmd.ProcessState, demo.stderr)
	case <-time.After(2 * time.Minute):
		return "", fmt.Errorf("its demo did not end within 2 minutes")
	}
}

// stopDemo stops the demo hearthd, if it runs, with SIGINT (as Ctrl-C
// does), and removes its directory.
func stopDemo() {
	if demo.cmd != nil && demo.cmd.Process != nil {
		demo.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-demo.done:
		case <-time.After(30 * time.Second):
			demo.cmd.Process.Kill()
			<-demo.done
		}
	}
	if demo.dir != "" {
		os.RemoveAll(demo.dir)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
