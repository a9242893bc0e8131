package dispatcher

// AnswerFailed takes the device's own error answer to the set of the
// attempt now waiting for its confirmation, matched to that set by its
// request id (Shelly's RPC: the adapter keeps only each device's newest
// request, so an answer to an earlier attempt never arrives here): the
// attempt ends at once with err, and the retry policy decides on the next
// from err's class (a permanent one ends the command permanent_error).
// Unlike SendFailed, whose log lines name no set, it holds for every
// attempt and for a risky action too. A sleepy device's or a resumed
// attempt, or a device with no attempt waiting, is left as it is.
func (d *Dispatcher) AnswerFailed(device string, err error) {
	q, ok := d.devices[device]
	if !ok || err == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.cur
	if t == nil || t.confirm == nil || t.Ended() || q.dev.Sleep.Sleepy {
		return
	}
	c := t.confirm
	if c.resumed || c.failure != nil {
		return
	}
	c.failure = err
	q.changedLocked()
}
