package breaker

import "time"

// windowSlots is how many slices the failure-ratio window is counted in:
// it slides in steps of Window/windowSlots.
const windowSlots = 10

// window counts a closed breaker's Success and Failure outcomes over the
// last windowSlots steps, as retry.Budget counts its attempts: the
// current step and the ones before it, so between (windowSlots-1)/
// windowSlots and 1 Window long. Steps are counted from the Unix epoch.
type window struct {
	step  time.Duration
	slots [windowSlots]windowSlot
}

type windowSlot struct {
	used     bool
	at       int64 // the slot's step, counted from the Unix epoch
	calls    int
	failures int
}

var unixEpoch = time.Unix(0, 0)

// stepOf returns the step holding t: floor((t - Unix epoch) / step). Sub
// saturates, so a time centuries away lands in a step, not a wrapped one.
func (w *window) stepOf(t time.Time) int64 {
	d := int64(t.Sub(unixEpoch))
	s := d / int64(w.step)
	if d%int64(w.step) < 0 {
		s--
	}
	return s
}

// add counts an outcome at now.
func (w *window) add(now time.Time, failure bool) {
	at := w.stepOf(now)
	s := &w.slots[(at%windowSlots+windowSlots)%windowSlots]
	if !s.used || s.at != at {
		*s = windowSlot{used: true, at: at}
	}
	s.calls++
	if failure {
		s.failures++
	}
}

// counts returns the outcomes, and the failures among them, in the window
// ending at now.
func (w *window) counts(now time.Time) (calls, failures int) {
	at := w.stepOf(now)
	for i := range w.slots {
		s := &w.slots[i]
		if s.used && s.at <= at && at-s.at < windowSlots {
			calls += s.calls
			failures += s.failures
		}
	}
	return calls, failures
}

// reset forgets every outcome.
func (w *window) reset() { w.slots = [windowSlots]windowSlot{} }
