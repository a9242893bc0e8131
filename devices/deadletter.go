package devices

import "encoding/json"

// DeadLetter is one entry of the dead-letter store: a command that ended
// without success and will never be attempted again (expired, failed, or
// superseded before it reached a sleeping device), kept for an operator to
// look at. The store keeps them in the order they died (Seq) and serves
// them on GET /api/v1/deadletters.
//
// Its JSON is the op's fields with "seq" first, which is the dead letter's
// Seq, and "op_seq" last, which is the op's own Seq (its order of
// acceptance, "seq" on the op's result and record):
//
//	{"seq":3,"op_id":"a","device":"thermostat","target":{...},…,"op_seq":17}
type DeadLetter struct {
	// Seq orders dead letters as they were stored; the store assigns it.
	Seq uint64
	// Op is the command as it ended: its Status is Failed, Expired or
	// Superseded, UpdatedAt is when it ended.
	Op
}

// deadLetterJSON is a DeadLetter's JSON: the outer Seq shadows the op's
// (encoding/json takes the shallowest field of a name), which OpSeq
// carries instead.
type deadLetterJSON struct {
	Seq uint64 `json:"seq"`
	Op
	OpSeq uint64 `json:"op_seq"`
}

// MarshalJSON encodes d as its type's comment shows.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	return json.Marshal(deadLetterJSON{Seq: d.Seq, Op: d.Op, OpSeq: d.Op.Seq})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	var j deadLetterJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	j.Op.Seq = j.OpSeq
	*d = DeadLetter{Seq: j.Seq, Op: j.Op}
	return nil
}
