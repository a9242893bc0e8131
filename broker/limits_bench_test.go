package broker

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowSockets is how many unauthenticated sockets the memory benchmark
// opens: the 2,000.
const slowSockets = 2000

// BenchmarkSlowUnauthenticatedSockets measures the broker's memory with
// 2,000 sockets that never finish their CONNECT, as a ratio to its idle
// memory in the same run, and how long the broker took to close each:
//
//	go test -run '^$' -bench SlowUnauthenticatedSockets -benchtime 1x ./broker/
//
// Two attacks: "partial" sends a CONNECT header claiming 16,000 bytes and
// 1 KiB of it; "claim1MiB" sends only a 4-byte header claiming 1 MiB − 1
// (mochi alone allocates the claimed length at once). Each with the
// default MaxUnauthenticated (64; beyond it sockets are closed at accept)
// and with room for all 2,000. The sockets come from 125 loopback
// addresses, 16 each, so that an address's share of the cap is not what
// limits them, and from another process (TestSlowSocketsAttacker), so that
// only the broker's side is in the memory measured. Memory is sampled
// every 50 ms until every socket is closed: Go's heap and stacks in use
// after a GC, and the process's RSS.
//
// The benchmark needs two file descriptors per socket: it raises its soft
// limit to the hard one if needed, and skips when even that is too low.
func BenchmarkSlowUnauthenticatedSockets(b *testing.B) {
	raiseFileLimit(b, 2*slowSockets+256)
	for _, attack := range []string{"partial", "claim1MiB"} {
		for _, maxUnauth := range []int{0, slowSockets} {
			name := fmt.Sprintf("attack=%s/max_unauthenticated=%d", attack, maxUnauth)
			if maxUnauth == 0 {
				name = fmt.Sprintf("attack=%s/max_unauthenticated=default", attack)
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					slowSocketsOnce(b, attack, maxUnauth)
				}
			})
		}
	}
}

func slowSocketsOnce(b *testing.B, attack string, maxUnauth int) {
	const timeout = DefaultConnectTimeout
	br, err := Start(Options{Listen: "127.0.0.1:0", MaxUnauthenticated: maxUnauth})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	idle := sampleMemory()

	// The attacker is another process, so that its ends of the sockets
	// are not in the broker's memory.
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlowSocketsAttacker$")
	cmd.Env = append(os.Environ(), "HEARTH_SLOW_SOCKETS="+br.Addr()+","+attack+","+timeout.String())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	peak := idle
	for done := false; !done; {
		select {
		case err := <-exited:
			if err != nil {
				b.Fatalf("attacker: %v\n%s", err, out.String())
			}
			done = true
		case <-time.After(50 * time.Millisecond):
			peak = peak.max(sampleMemory())
		}
	}
	var open int
	var longest float64
	if _, err := fmt.Sscanf(lastLine(out.String(), "slow sockets:"), "slow sockets: open %d longest %g", &open, &longest); err != nil {
		b.Fatalf("attacker's report: %v\n%s", err, out.String())
	}
	if open > 0 {
		b.Errorf("%d of %d sockets still open 5 s after the CONNECT deadline of %v", open, slowSockets, timeout)
	}
	s := br.Stats()
	heapRatio := float64(peak.goBytes) / float64(idle.goBytes)
	rssRatio := float64(peak.rss) / float64(idle.rss)
	b.ReportMetric(heapRatio, "heap-ratio")
	b.ReportMetric(rssRatio, "rss-ratio")
	b.ReportMetric(mib(peak.goBytes), "heap-peak-MiB")
	b.ReportMetric(mib(peak.rss), "rss-peak-MiB")
	b.ReportMetric(longest, "max-close-s")
	b.Logf("%d sockets (%s): Go heap+stacks %.1f → %.1f MiB (×%.2f), RSS %.1f → %.1f MiB (×%.2f); "+
		"closed at accept %d, at the CONNECT deadline %d, bad first packet %d; the last closed %.2f s after its dial (deadline %v)",
		slowSockets, attack, mib(idle.goBytes), mib(peak.goBytes), heapRatio, mib(idle.rss), mib(peak.rss), rssRatio,
		s.UnauthenticatedFull, s.ConnectTimeouts, s.BadFirstPackets, longest, timeout)
}

// TestSlowSocketsAttacker is the attacker of
// BenchmarkSlowUnauthenticatedSockets, run in a process of its own; it
// does nothing unless HEARTH_SLOW_SOCKETS says "addr,attack,deadline". It
// opens the sockets from 125 loopback addresses, sends each the attack's
// bytes, then notes when the broker closes each (reading them in order,
// one goroutine), and reports how many were still open 5 s after the
// deadline and the longest time from a dial to its close.
func TestSlowSocketsAttacker(t *testing.T) {
	env := os.Getenv("HEARTH_SLOW_SOCKETS")
	if env == "" {
		t.Skip("run by BenchmarkSlowUnauthenticatedSockets")
	}
	f := strings.Split(env, ",")
	addr, attack := f[0], f[1]
	timeout, err := time.ParseDuration(f[2])
	if err != nil {
		t.Fatal(err)
	}
	first := []byte{0x10, 0x80, 0x7d} // a CONNECT of 16,000 bytes…
	first = append(first, make([]byte, 1024)...)
	if attack == "claim1MiB" {
		first = []byte{0x10, 0xff, 0xff, 0x3f}
	}
	conns := make([]net.Conn, 0, slowSockets)
	dialed := make([]time.Time, 0, slowSockets)
	for i := range slowSockets {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%125))}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		defer c.Close()
		dialed = append(dialed, time.Now())
		c.Write(first) // fails only if the broker has closed it already
		conns = append(conns, c)
	}
	open, longest := 0, time.Duration(0)
	buf := make([]byte, 64)
	for i, c := range conns {
		c.SetReadDeadline(dialed[i].Add(timeout + 5*time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				if isTimeout(err) {
					open++
				} else {
					longest = max(longest, time.Since(dialed[i]))
				}
				break
			}
		}
	}
	fmt.Printf("slow sockets: open %d longest %g\n", open, longest.Seconds())
}

func lastLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}

// memory is one sample of the process's memory, in bytes.
type memory struct{ goBytes, rss uint64 }

func (m memory) max(o memory) memory { return memory{max(m.goBytes, o.goBytes), max(m.rss, o.rss)} }

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// sampleMemory returns Go's heap and stacks in use after a GC and the
// resident set size (Linux's /proc/self/statm; 0 elsewhere).
func sampleMemory() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{goBytes: ms.HeapInuse + ms.StackInuse}
	if statm, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(statm)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			m.rss = pages * uint64(os.Getpagesize())
		}
	}
	return m
}

// raiseFileLimit raises the soft limit of open files to want, up to the
// hard limit, and skips the benchmark if that is not enough.
func raiseFileLimit(b *testing.B, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("getrlimit: %v", err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		b.Skipf("open files limited to %d; want %d (raise ulimit -Hn)", lim.Max, want)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("setrlimit: %v", err)
	}
}
