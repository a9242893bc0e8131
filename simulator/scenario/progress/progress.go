// Package progress prints where a long hearth-sim scenario is, for a
// person watching a terminal: one line per phase, headed by the
// scenario's name and the time since it started ("power-loss [  12s]
// full: all 10000 devices back 9.8s after the cut"). A nil *Phases prints
// nothing: that is what a scenario gets when its stderr is not a terminal
// (cmd/hearth-sim decides, with golang.org/x/term), so logs and CI output
// carry no progress lines. It imports nothing of Hearth's.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Phases prints a scenario's phases to one writer. Its methods may be
// called from several goroutines, and on a nil *Phases (they do nothing).
type Phases struct {
	mu    sync.Mutex
	w     io.Writer
	name  string
	start time.Time
	now   func() time.Time
}

// New returns the Phases of the scenario name, printed to w, timed from
// now by the system clock.
func New(w io.Writer, name string) *Phases {
	return &Phases{w: w, name: name, start: time.Now(), now: time.Now}
}

// Printf prints one phase line: the scenario's name, the whole seconds
// since New, then format and args, and a newline.
func (p *Phases) Printf(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := p.now().Sub(p.start).Truncate(time.Second)
	fmt.Fprintf(p.w, "%s [%5s] %s\n", p.name, elapsed, fmt.Sprintf(format, args...))
}
