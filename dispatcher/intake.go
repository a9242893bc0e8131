package dispatcher

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hearthd/hearth/devices"
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
	op     devices.Op
	queue  *deviceQueue
	result *devices.Result // set when the request is answered without storing
	dupOf  int             // ≥ 0: repeats the op_id of that earlier item of the batch
}

func (d *Dispatcher) admit(batch []Request) {
	now := d.now()
	items := make([]admitted, len(batch))
	seen := make(map[string]int, len(batch)) // op_id → index of the first in this batch
	var toSave []devices.Op
	for i, req := range batch {
		it := &items[i]
		it.req, it.dupOf = req, -1
		op, q, rej := d.validate(req, now)
		if rej != nil {
			it.result = rej
			continue
		}
		if j, dup := seen[op.OpID]; dup {
			it.dupOf = j
			continue
		}
		if stored, ok, err := d.journal.Lookup(op.OpID); err != nil {
			d.log.Error("lookup op_id", "op_id", op.OpID, "err", err)
			r := reject(req.Device, op.OpID, devices.ReasonStoreError, "the command store could not be read", now)
			it.result = &r
			continue
		} else if ok {
			r := stored.Result()
			it.result = &r
			continue
		}
		seen[op.OpID] = i
		it.op, it.queue = op, q
		toSave = append(toSave, op)
	}

	if len(toSave) > 0 {
		if err := d.journal.Save(toSave...); err != nil {
			d.log.Error("store commands", "count", len(toSave), "err", err)
			for i := range items {
				if items[i].queue != nil {
					r := reject(items[i].req.Device, items[i].op.OpID, devices.ReasonStoreError, "the command could not be stored", now)
					items[i].result, items[i].queue = &r, nil
				}
			}
		}
	}

	var superseded []devices.Op
	for i := range items {
		it := &items[i]
		switch {
		case it.queue != nil:
			r := it.op.Result()
			d.publishResult(r)
			d.log.Info("command accepted", "op_id", it.op.OpID, "device", it.op.Device, "status", it.op.Status, "target", it.op.Target, "deadline", it.op.Deadline)
			if it.req.Done != nil {
				it.req.Done(r)
			}
			if !it.op.Status.Terminal() {
				superseded = append(superseded, it.queue.add(it.op)...)
			}
		case it.dupOf >= 0:
			// A repeat of an op_id earlier in this batch: answer with
			// that one's result.
			first := items[it.dupOf]
			r := first.op.Result()
			if first.result != nil {
				r = *first.result
			}
			d.answer(it.req, r)
		default:
			d.answer(it.req, *it.result)
		}
	}
	if len(superseded) > 0 {
		if err := d.journal.Save(superseded...); err != nil {
			d.log.Error("store superseded commands", "count", len(superseded), "err", err)
		}
		for _, op := range superseded {
			d.publishResult(op.Result())
		}
	}
}

// answer publishes a result that ends or repeats a request without
// storing anything.
func (d *Dispatcher) answer(req Request, r devices.Result) {
	if r.Status == devices.Rejected {
		d.log.Info("command rejected", "op_id", r.OpID, "device", r.Device, "reason", r.Reason, "detail", r.Detail)
	}
	if r.Device != "" && devices.ValidID(r.Device) == nil {
		d.publishResult(r)
	}
	if req.Done != nil {
		req.Done(r)
	}
}

// validate turns a request into an op ready to store, or a rejection.
func (d *Dispatcher) validate(req Request, now time.Time) (devices.Op, *deviceQueue, *devices.Result) {
	opID := peekOpID(req.Payload)
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
	cmd, err := devices.ParseCommand(q.dev.Class, req.Payload)
	if err != nil {
		var detail string
		if e, ok := err.(*devices.Error); ok {
			detail = e.Detail
		} else {
			detail = err.Error()
		}
		return fail(devices.ReasonOf(err), detail)
	}
	if cmd.OpID == "" {
		cmd.OpID = d.newOpID()
	}
	ttl := cmd.TTL
	if ttl == 0 {
		ttl = q.dev.TTL
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

// peekOpID returns a valid op_id from a JSON payload, so that even a
// rejection carries the caller's op_id where one can be read.
func peekOpID(payload []byte) string {
	if len(payload) > devices.MaxPayloadBytes || len(payload) == 0 {
		return ""
	}
	var v struct {
		OpID string `json:"op_id"`
	}
	if json.Unmarshal(payload, &v) != nil || devices.ValidOpID(v.OpID) != nil {
		return ""
	}
	return v.OpID
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
