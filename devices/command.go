package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on a command payload, part of the external contract.
const (
	// MaxPayloadBytes is the largest command payload Hearth reads: 64 KiB.
	MaxPayloadBytes = 64 << 10
	// MaxOpIDBytes is the longest op_id Hearth takes: 64 bytes.
	MaxOpIDBytes = 64
	// MaxTTL is the longest TTL a command may ask for: 30 days, enough for a
	// sleepy device's longest wake-up interval.
	MaxTTL = 30 * 24 * time.Hour
)

// Target is the state a command asks for: attribute name → value, in the
// bridge's own attribute names (Zigbee2MQTT's for now). Values are strings
// (enums, in the bridge's spelling: "ON", "heat"), float64 (numbers), or,
// for a light's color, a map[string]any of one color form (numbers as
// float64, hex as a string; see ValidateFor), which round-trips through
// JSON unchanged.
type Target map[string]any

// Attributes returns the state attributes t names, sorted, leaving out
// parameters such as a light's transition that describe how to get there
// rather than where.
func (t Target) Attributes() []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		if !isParameter(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Covers reports whether t asks for every state attribute that older asks
// for, so that delivering t makes older pointless.
func (t Target) Covers(older Target) bool {
	for _, k := range older.Attributes() {
		if _, ok := t[k]; !ok {
			return false
		}
	}
	return true
}

// Command is a parsed command payload, before Hearth assigns what the
// caller left out.
type Command struct {
	// OpID is the caller's operation ID, "" when none was given.
	OpID string
	// Target is the validated target state.
	Target Target
	// TTL is how long the command stays worth doing, 0 when none was given.
	TTL time.Duration
	// IssuedAt is when the caller issued the command, zero when not given;
	// the TTL counts from it when present.
	IssuedAt time.Time
}

// Error is why a command payload is rejected. Reason is the machine code
// published in the result; Detail says what exactly was wrong.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Detail }

func reject(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the Reason of err when it is, or wraps, an *Error, and
// ReasonInvalidPayload otherwise.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonInvalidPayload
}

// minIssuedAt is the earliest plausible issued_at: a sender whose clock
// reads earlier has never set it.
var minIssuedAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Reserved keys of a JSON command payload; every other key is a target
// attribute.
const (
	KeyOpID     = "op_id"
	KeyTTL      = "ttl"
	KeyIssuedAt = "issued_at"
)

// ParseCommand parses a command payload for a device of class c, as
// DESIGN.md describes the intake on hearth/<device>/set:
//
//   - a JSON object of target attributes, with optional reserved keys op_id
//     (string, 1–64 bytes), ttl (a Go duration string such as "30s", or a
//     number of seconds) and issued_at (RFC 3339);
//   - or a plain string (or JSON string), taken as the state attribute, as
//     Home Assistant's MQTT lock and switch send it ("LOCK", "ON").
//
// The target is validated for the class. Any failure is an *Error whose
// Reason says which rule was broken; a partially valid payload is never
// returned. It is ParseCommandFor without the device's capabilities.
func ParseCommand(c Class, payload []byte) (Command, error) { return ParseCommandFor(c, nil, payload) }

// ParseCommandFor parses a command payload as ParseCommand does, for a
// device of class c whose capabilities are caps (nil: unknown), validating
// the target with ValidateFor.
func ParseCommandFor(c Class, caps *Capabilities, payload []byte) (Command, error) {
	if len(payload) > MaxPayloadBytes {
		return Command{}, reject(ReasonPayloadTooLarge, "payload is %d bytes; the limit is %d", len(payload), MaxPayloadBytes)
	}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 {
		return Command{}, reject(ReasonInvalidPayload, "empty payload")
	}
	if !utf8.Valid(p) {
		return Command{}, reject(ReasonInvalidPayload, "payload is not valid UTF-8")
	}
	var raw map[string]any
	switch p[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return Command{}, reject(ReasonInvalidPayload, "malformed JSON: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return Command{}, reject(ReasonInvalidPayload, "malformed JSON: data after the object")
		}
	case '"':
		var s string
		if err := json.Unmarshal(p, &s); err != nil {
			return Command{}, reject(ReasonInvalidPayload, "malformed JSON string: %v", err)
		}
		raw = map[string]any{"state": s}
	case '[':
		return Command{}, reject(ReasonInvalidPayload, "a JSON array is not a command; send an object of target attributes")
	default:
		if json.Valid(p) {
			return Command{}, reject(ReasonInvalidPayload, "a JSON %s is not a command; send an object of target attributes or a plain state", p)
		}
		s := string(p)
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				return Command{}, reject(ReasonInvalidPayload, "plain-string payload contains a control character")
			}
		}
		raw = map[string]any{"state": s}
	}

	var cmd Command
	var err error
	if v, ok := raw[KeyOpID]; ok {
		if cmd.OpID, err = parseOpID(v); err != nil {
			return Command{}, err
		}
		delete(raw, KeyOpID)
	}
	if v, ok := raw[KeyTTL]; ok {
		if cmd.TTL, err = parseTTL(v); err != nil {
			return Command{}, err
		}
		delete(raw, KeyTTL)
	}
	if v, ok := raw[KeyIssuedAt]; ok {
		s, isString := v.(string)
		t, perr := time.Parse(time.RFC3339Nano, s)
		if !isString || perr != nil {
			return Command{}, reject(ReasonInvalidIssuedAt, "issued_at must be an RFC 3339 time such as \"2026-11-29T19:00:00Z\", got %s", show(v))
		}
		if t.Before(minIssuedAt) {
			return Command{}, reject(ReasonInvalidIssuedAt, "issued_at %s is before 2000: the sender's clock is not set", s)
		}
		cmd.IssuedAt = t
		delete(raw, KeyIssuedAt)
	}
	if cmd.Target, err = ValidateFor(c, caps, raw); err != nil {
		return Command{}, err
	}
	return cmd, nil
}

// ValidOpID reports whether id can be an op_id: 1–64 bytes of printable
// UTF-8 without spaces.
func ValidOpID(id string) error {
	_, err := parseOpID(id)
	return err
}

func parseOpID(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", reject(ReasonInvalidOpID, "op_id must be a string, got %s", show(v))
	}
	if s == "" {
		return "", reject(ReasonInvalidOpID, "op_id is empty")
	}
	if len(s) > MaxOpIDBytes {
		return "", reject(ReasonInvalidOpID, "op_id is %d bytes; the limit is %d", len(s), MaxOpIDBytes)
	}
	if !utf8.ValidString(s) {
		return "", reject(ReasonInvalidOpID, "op_id is not valid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return "", reject(ReasonInvalidOpID, "op_id %q contains a space or a character that does not print", s)
		}
	}
	return s, nil
}

func parseTTL(v any) (time.Duration, error) {
	var d time.Duration
	switch v := v.(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, reject(ReasonInvalidTTL, "ttl %q is not a Go duration such as \"30s\" or \"5m\"", v)
		}
	case json.Number:
		f, err := v.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, reject(ReasonInvalidTTL, "ttl %s is not a number of seconds", v)
		}
		if f > MaxTTL.Seconds() {
			return 0, reject(ReasonInvalidTTL, "ttl %s s is longer than the limit of %s", v, MaxTTL)
		}
		d = time.Duration(f * float64(time.Second))
	default:
		return 0, reject(ReasonInvalidTTL, "ttl must be a duration string or a number of seconds, got %s", show(v))
	}
	if d <= 0 {
		return 0, reject(ReasonInvalidTTL, "ttl must be positive, got %s", show(v))
	}
	if d > MaxTTL {
		return 0, reject(ReasonInvalidTTL, "ttl %s is longer than the limit of %s", d, MaxTTL)
	}
	return d, nil
}

// show renders a decoded JSON value for an error detail.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// PeekOpID returns the op_id of a command payload when it holds a valid
// one, whatever else is wrong with it, so that even a rejection carries
// the caller's op_id; "" otherwise (no JSON object, no op_id, not a
// string, not valid, or a payload over MaxPayloadBytes). The key is
// matched exactly: encoding/json would match a struct field without
// regard to case, and "OP_ID" is not the reserved key.
func PeekOpID(payload []byte) string {
	if len(payload) > MaxPayloadBytes || len(payload) == 0 {
		return ""
	}
	var v map[string]json.RawMessage
	var id string
	if json.Unmarshal(payload, &v) != nil || json.Unmarshal(v[KeyOpID], &id) != nil || ValidOpID(id) != nil {
		return ""
	}
	return id
}
