package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
)

// maxBatch bounds how many commands one group commit stores.
const maxBatch = 512

// runIntake stores commands in groups: it takes every request waiting at
// the moment, validates them, stores the accepted ones in one synced
// commit, and only then publishes "accepted" and queues them, in arrival
// order. A burst therefore costs one fsync, not one per command.
func (d *Dispatcher) runIntake(ctx context.Context) {
	batch := make([]Request, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case req := <-d.intake:
			batch = append(batch, req)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case req := <-d.intake:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		d.admit(batch)
	}
}

// admitted is one request on its way through admit.
type admitted struct {
	req    Request
	op     devices.Op      // as accepted
	queue  *deviceQueue    // set while the request is to be stored and queued
	result *devices.Result // set when the request is answered without storing
	dupOf  int             // ≥ 0: repeats the op_id of that earlier item of the batch
	// supersededBy, if set, is a later command of this batch that covers
	// this one: it is stored as superseded and never queued.
	supersededBy string
	// firstStored: its first attempt is stored with its acceptance
	// (deviceQueue.firstAttemptWithAccept).
	firstStored bool
}

// admit stores and queues one batch. A newer command supersedes the older
// ones it covers before anything is stored, and the superseded records go
// into the same synced commit as the newer command: a crash can never
// leave a newer command stored and an older one it replaced still pending.
func (d *Dispatcher) admit(batch []Request) {
	now := d.now()
	items := make([]admitted, len(batch))
	seen := make(map[string]int, len(batch)) // op_id → index of the first in this batch
	inBatch := map[*deviceQueue][]int{}      // accepted items of this batch, per device
	var superseded []devices.Op              // earlier commands ended by this batch
	endedNow := map[string]int{}             // op_id → index in superseded
	for i, req := range batch {
		it := &items[i]
		it.req, it.dupOf = req, -1
		opID := devices.PeekOpID(req.Payload)
		if j, dup := seen[opID]; dup {
			it.dupOf = j
			continue
		}
		if k, ok := endedNow[opID]; ok && superseded[k].Device == req.Device {
			// Its superseded record is not stored yet: the store would
			// still say accepted.
			r := superseded[k].Result()
			it.result = &r
			continue
		}
		op, q, answer := d.validate(req, now)
		if answer != nil {
			it.result = answer
			continue
		}
		seen[op.OpID] = i
		it.op, it.queue = op, q
		if op.Status.Terminal() {
			continue // expired on arrival: stored, never queued
		}
		for _, j := range inBatch[q] {
			if items[j].supersededBy == "" && q.m.Replaces(op.Target, items[j].op.Target) {
				items[j].supersededBy = op.OpID
			}
		}
		inBatch[q] = append(inBatch[q], i)
		for _, e := range q.supersede(op, now) {
			endedNow[e.OpID] = len(superseded)
			superseded = append(superseded, e)
		}
	}

	var toSave []devices.Op
	first := map[*deviceQueue]bool{} // a device's first command of this batch was seen
	for i := range items {
		it := &items[i]
		if it.queue == nil {
			continue
		}
		op := it.op
		switch {
		case it.supersededBy != "":
			op = machine.SupersededBy(it.op, it.supersededBy, now)
		case !op.Status.Terminal() && !first[it.queue] && it.queue.firstAttemptWithAccept(op, now):
			// The device's send follows at once: its record rides this
			// commit (attempt recorded before sent, one commit fewer).
			op.Attempts, op.LastSentAt = 1, now
			it.firstStored = true
		}
		first[it.queue] = true
		toSave = append(toSave, op)
	}
	toSave = append(toSave, superseded...)
	if len(toSave) > 0 {
		if err := d.journal.Save(toSave...); err != nil {
			d.log.Warn("store commands", "count", len(toSave), "err", err)
			for i := range items {
				if items[i].queue != nil {
					r := reject(items[i].req.Device, items[i].op.OpID, devices.ReasonStoreError, "the command could not be stored", now)
					items[i].result, items[i].queue = &r, nil
				}
			}
			// The commands superseded in memory are still accepted in the
			// store: queue them again.
			byDevice := map[string][]devices.Op{}
			for _, op := range superseded {
				byDevice[op.Device] = append(byDevice[op.Device], op)
			}
			for dev, ops := range byDevice {
				d.devices[dev].restore(ops)
			}
			superseded = nil
		}
	}
	for _, op := range superseded {
		d.devices[op.Device].forget([]devices.Op{op}) // stored: never restored
	}
	// The audit trail and the dead letters are stored before anyone hears
	// of the outcome.
	d.auditIntake(items, superseded, now)
	d.deadLetterIntake(items, superseded, now)

	for i := range items {
		it := &items[i]
		switch {
		case it.queue != nil:
			r := it.op.Result()
			if it.op.Status.Terminal() {
				d.ended(it.queue.dev.Device, it.op) // expired on arrival
			}
			d.publishResult(r)
			d.log.Info("command accepted", "op_id", it.op.OpID, "device", it.op.Device, "status", it.op.Status, "target", it.op.Target, "deadline", it.op.Deadline)
			if it.req.Done != nil {
				it.req.Done(r)
			}
			switch {
			case it.supersededBy != "":
				d.log.Info("command superseded", "op_id", it.op.OpID, "device", it.op.Device, "by", it.supersededBy, "attempts", 0)
				op := machine.SupersededBy(it.op, it.supersededBy, now)
				d.ended(it.queue.dev.Device, op)
				d.publishResult(op.Result())
			case it.firstStored:
				it.queue.pushFirstStored(it.op)
			case !it.op.Status.Terminal():
				it.queue.push(it.op)
			}
		case it.dupOf >= 0:
			// A repeat of an op_id earlier in this batch: answer with
			// that one's result.
			first := items[it.dupOf]
			r := first.op.Result()
			switch {
			case first.result != nil:
				r = *first.result
			case first.supersededBy != "":
				r = machine.SupersededBy(first.op, first.supersededBy, now).Result()
			}
			switch {
			case r.Device != it.req.Device:
				r = reject(it.req.Device, r.OpID, devices.ReasonOpIDConflict, "op_id "+quote(r.OpID)+" belongs to a command for device "+quote(r.Device), now)
			case d.authz != nil && first.req.Principal != it.req.Principal:
				// As for a stored op_id: not theirs to read.
				r = reject(it.req.Device, r.OpID, devices.ReasonUnauthorized, "op_id "+quote(r.OpID)+" belongs to a command of another principal", now)
			}
			d.answer(it.req, r)
		default:
			d.answer(it.req, *it.result)
		}
	}
	for _, op := range superseded {
		d.endedOn(op)
		d.publishResult(op.Result())
	}
}

// auditIntake keeps the audit trail of a batch: the acceptance (or
// expiry on arrival) of every command to a safety-critical device, every
// rejection of one, and every unauthorized command; and it alerts on the
// refused and expired safety-critical ones.
func (d *Dispatcher) auditIntake(items []admitted, superseded []devices.Op, now time.Time) {
	var entries []devices.AuditEntry
	for i := range items {
		it := &items[i]
		q := d.devices[it.req.Device]
		switch {
		case it.queue != nil:
			op := it.op
			if it.supersededBy != "" {
				op = machine.SupersededBy(op, it.supersededBy, now)
			}
			if d.audited(q.dev.Device) {
				entries = append(entries, devices.NewAuditEntry(q.dev.Device, it.op, devices.AuditAccepted, now))
				if op.Status.Terminal() {
					entries = append(entries, devices.EndAudit(q.dev.Device, op, now))
				}
			}
			if op.Status == devices.Expired {
				d.alertIfSafetyCritical(q.dev.Device, op)
			}
		case it.result != nil && it.result.Status == devices.Rejected:
			r := it.result
			var dev devices.Device
			if q != nil {
				dev = q.dev.Device
			}
			if !(q != nil && d.audited(dev)) && r.Reason != devices.ReasonUnauthorized {
				continue
			}
			op := devices.Op{OpID: r.OpID, Device: it.req.Device, Principal: it.req.Principal,
				Status: r.Status, Reason: r.Reason, Detail: r.Detail}
			if q != nil {
				op.Target = peekTarget(q.dev.Class, it.req.Payload)
			}
			if d.auditLog != nil {
				entries = append(entries, devices.EndAudit(dev, op, now))
			}
			d.alertIfSafetyCritical(dev, op)
		}
	}
	for _, op := range superseded {
		if q := d.devices[op.Device]; d.audited(q.dev.Device) {
			entries = append(entries, devices.EndAudit(q.dev.Device, op, now))
		}
	}
	d.audit(entries...)
}

// peekTarget returns the target of a payload that parses, for the audit
// trail of a rejected command; nil when it does not.
func peekTarget(c devices.Class, payload []byte) devices.Target {
	cmd, err := devices.ParseCommand(c, payload)
	if err != nil {
		return nil
	}
	return cmd.Target
}

// answer publishes a result that ends or repeats a request without
// storing anything.
func (d *Dispatcher) answer(req Request, r devices.Result) {
	if r.Status == devices.Rejected {
		// Every rejection is of this request; any other result answers
		// a repeat of a command that ended, or will end, on its own.
		d.log.Info("command rejected", "op_id", r.OpID, "device", r.Device, "reason", r.Reason, "detail", r.Detail)
		d.rejected(r)
	}
	if r.Device != "" && devices.ValidID(r.Device) == nil {
		d.publishResult(r)
	}
	if req.Done != nil {
		req.Done(r)
	}
}

// MaxClockSkew is how far in the future a command's issued_at may lie: a
// caller's clock may run a little ahead, not more.
const MaxClockSkew = 5 * time.Minute

// validate turns a request into an op ready to store, or answers it: a
// rejection, or the stored result of a known op_id. The checks run in this
// order: the device exists, the message is not retained, the op_id is new
// (a known op_id is answered from the store whatever the payload says),
// then the payload itself (for the device's capabilities when known),
// the sender's permission, that the target does not contradict itself
// (devices.Coherent), and, for a risky
// action from a transport's backlog, that it carries issued_at.
func (d *Dispatcher) validate(req Request, now time.Time) (devices.Op, *deviceQueue, *devices.Result) {
	opID := devices.PeekOpID(req.Payload)
	fail := func(reason devices.Reason, detail string) (devices.Op, *deviceQueue, *devices.Result) {
		if opID == "" {
			opID = d.newOpID()
		}
		r := reject(req.Device, opID, reason, detail, now)
		return devices.Op{}, nil, &r
	}
	q, ok := d.devices[req.Device]
	if !ok {
		return fail(devices.ReasonUnknownDevice, "no device "+quote(req.Device)+" in the configuration")
	}
	if req.Retained {
		return fail(devices.ReasonRetainedCommand, "command messages must not be retained: a retained command replays on every reconnect; "+
			"clear it with an empty retained message, e.g. mosquitto_pub -r -n -t "+d.topic(req.Device, "set"))
	}
	if opID != "" {
		stored, found, err := d.journal.Lookup(opID)
		switch {
		case err != nil:
			d.log.Error("lookup op_id", "op_id", opID, "err", err)
			return fail(devices.ReasonStoreError, "the command store could not be read")
		case found && stored.Device != req.Device:
			return fail(devices.ReasonOpIDConflict, "op_id "+quote(opID)+" belongs to a command for device "+quote(stored.Device))
		case found && d.authz != nil && stored.Principal != req.Principal:
			// Another principal's op_id: its result is not theirs to read.
			return fail(devices.ReasonUnauthorized, "op_id "+quote(opID)+" belongs to a command of another principal")
		case found:
			r := stored.Result()
			return devices.Op{}, nil, &r
		}
	}
	// The device's capabilities, when its bridge has described it,
	// narrow the class's rules (devices.ValidateFor).
	cmd, err := devices.ParseCommandFor(q.dev.Class, q.caps.Load(), req.Payload)
	if err != nil {
		var detail string
		if e, ok := err.(*devices.Error); ok {
			detail = e.Detail
		} else {
			detail = err.Error()
		}
		return fail(devices.ReasonOf(err), detail)
	}
	if err := devices.SafeEndpoints(q.dev.Device, q.caps.Load(), cmd.Target); err != nil {
		return fail(devices.ReasonOf(err), err.(*devices.Error).Detail)
	}
	if cmd.IssuedAt.After(now.Add(MaxClockSkew)) {
		return fail(devices.ReasonInvalidIssuedAt, fmt.Sprintf("issued_at %s is %s in the future; check the sender's clock",
			cmd.IssuedAt.Format(time.RFC3339), cmd.IssuedAt.Sub(now).Round(time.Second)))
	}
	if err := d.authorize(q.dev.Device, req.Principal, cmd.Target); err != nil {
		return fail(devices.ReasonUnauthorized, err.Error())
	}
	if err := devices.Coherent(q.dev.Class, cmd.Target); err != nil {
		return fail(devices.ReasonOf(err), err.(*devices.Error).Detail)
	}
	if req.Backlog && cmd.IssuedAt.IsZero() && devices.Risky(q.dev.Device, cmd.Target) {
		// Its TTL would count from now, and it may be minutes old: an
		// UNLOCK pressed before Hearth's restart must not unlock now.
		return fail(devices.ReasonStaleCommand, fmt.Sprintf("this %s was delivered with the commands the broker kept for Hearth while it was away, and has no issued_at: "+
			"its age is unknown, and a risky action is never carried out on an unknown age; send it again, or send it with issued_at (RFC 3339), from which its TTL counts",
			devices.Action(q.dev.Device, cmd.Target)))
	}
	if l := d.lostDedup; !l.At.IsZero() && now.Before(l.Until) && !cmd.IssuedAt.IsZero() && cmd.IssuedAt.Before(l.At) {
		// Its op_id may be one the lost records held: it may have run.
		return fail(devices.ReasonStaleCommand, fmt.Sprintf("issued_at %s is before %s, when Hearth's command store was found damaged and quarantined: "+
			"whether a command with this op_id ran before is unknown, so commands issued before then are refused until %s; "+
			"if it is still wanted, send it again with a new issued_at",
			cmd.IssuedAt.UTC().Format(time.RFC3339), l.At.UTC().Format(time.RFC3339), l.Until.UTC().Format(time.RFC3339)))
	}
	if cmd.OpID == "" {
		cmd.OpID = d.newOpID()
	}
	ttl := cmd.TTL
	if ttl == 0 {
		ttl = q.dev.TTL
		if devices.Risky(q.dev.Device, cmd.Target) {
			ttl = min(ttl, DefaultRiskyTTL)
		}
	}
	// The TTL counts from issued_at when given, but never from a moment
	// later than now: a caller's clock running ahead must not stretch it.
	from := now
	if !cmd.IssuedAt.IsZero() && cmd.IssuedAt.Before(now) {
		from = cmd.IssuedAt
	}
	op := devices.Op{
		OpID:       cmd.OpID,
		Device:     req.Device,
		Target:     cmd.Target,
		Principal:  req.Principal,
		AcceptedAt: now,
		IssuedAt:   cmd.IssuedAt,
		Deadline:   from.Add(ttl),
		Status:     devices.Accepted,
		UpdatedAt:  now,
	}
	if !op.Deadline.After(now) {
		op.Status = devices.Expired
		op.Reason = devices.ReasonTTLElapsed
		op.Detail = "the TTL had passed when the command arrived (issued_at + ttl is in the past)"
	}
	return op, q, nil
}

func reject(device, opID string, reason devices.Reason, detail string, now time.Time) devices.Result {
	return devices.Result{OpID: opID, Device: device, Status: devices.Rejected, Reason: reason, Detail: detail, At: now}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
