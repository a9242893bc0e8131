package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// Record frame. Every record of ops, audit, deadletters and states is
// stored in frame v1:
//
//	0x01 | crc32c (4 bytes, big-endian) | JSON
//
// where the CRC-32C (Castagnoli polynomial, as in iSCSI and ext4) covers
// the bucket's name, a 0x00 byte, the record's key and the JSON, in that
// order. Covering bucket and key makes a record moved to another key (a
// flipped key byte) damage rather than a missing record, and lets a raw
// scan of a damaged file tell which bucket a record came from. A value
// that starts with '{' is a legacy record from before the frame: plain
// JSON without a check, which Open decodes (verify) so that a changed
// byte in one is damage too. Every write writes v1.

// frameV1 is the first byte of a v1 record; frameHeader is its length
// before the JSON: the version byte and the checksum.
const (
	frameV1     = 0x01
	frameHeader = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksummed are the buckets whose records carry the frame.
var checksummed = [][]byte{bucketOps, bucketAudit, bucketDeadLetters, bucketStates}

// isChecksummed reports whether records of bucket carry the frame.
func isChecksummed(bucket []byte) bool {
	for _, b := range checksummed {
		if bytes.Equal(b, bucket) {
			return true
		}
	}
	return false
}

// frameSum is the v1 checksum of body stored under key in bucket.
func frameSum(bucket, key, body []byte) uint32 {
	c := crc32.Update(0, castagnoli, bucket)
	c = crc32.Update(c, castagnoli, []byte{0})
	c = crc32.Update(c, castagnoli, key)
	return crc32.Update(c, castagnoli, body)
}

// frame returns the v1 record of JSON body stored under key in bucket.
func frame(bucket, key, body []byte) []byte {
	out := make([]byte, frameHeader, frameHeader+len(body))
	out = append(out, body...)
	return sealFrame(out, bucket, key)
}

// frameWithSeq returns the v1 record of body with "seq":seq as its first
// field (withSeq), stored under key in bucket, in one allocation.
func frameWithSeq(bucket, key, body []byte, seq uint64) []byte {
	out := make([]byte, frameHeader, frameHeader+len(body)+28)
	out = appendWithSeq(out, body, seq)
	return sealFrame(out, bucket, key)
}

// sealFrame fills in the header of rec, whose JSON follows frameHeader
// reserved bytes, and returns rec.
func sealFrame(rec, bucket, key []byte) []byte {
	rec[0] = frameV1
	binary.BigEndian.PutUint32(rec[1:frameHeader], frameSum(bucket, key, rec[frameHeader:]))
	return rec
}

// unframe returns the JSON of v, the record stored under key in bucket:
// the JSON of a v1 record whose checksum matches, or v itself when it is
// a legacy record (starting with '{'). A v1 record whose checksum does
// not match, an empty value, or one that starts with any other byte is a
// *recordError, which wraps ErrDamaged and names bucket and key. The
// returned slice aliases v.
func unframe(bucket, key, v []byte) ([]byte, error) {
	switch {
	case len(v) > 0 && v[0] == '{':
		return v, nil
	case len(v) >= frameHeader && v[0] == frameV1:
		body := v[frameHeader:]
		if binary.BigEndian.Uint32(v[1:frameHeader]) != frameSum(bucket, key, body) {
			return nil, &recordError{bucket: string(bucket), key: string(key), what: "record fails its checksum"}
		}
		return body, nil
	case len(v) == 0:
		return nil, &recordError{bucket: string(bucket), key: string(key), what: "record is empty"}
	}
	return nil, &recordError{bucket: string(bucket), key: string(key), what: fmt.Sprintf("record has unknown format 0x%02x", v[0])}
}

// unframeJSON unframes v (see unframe) and decodes its JSON into dst.
// A legacy record that does not decode is damage (legacyError: Open
// decoded it, so a byte changed since); a v1 record that passed its
// checksum and does not decode is an ordinary error naming the record
// (Hearth wrote it so).
func unframeJSON(bucket, key, v []byte, dst any) error {
	body, err := unframe(bucket, key, v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, dst); err != nil {
		if v[0] == '{' {
			return legacyError(bucket, key, err)
		}
		return fmt.Errorf("decode %s: %w", recordName(bucket, key), err)
	}
	return nil
}

// recordError is a record that cannot be trusted: it wraps ErrDamaged.
// guarded adds the file's path when it reaches a Store's caller.
type recordError struct {
	bucket, key string
	what        string
}

func (e *recordError) Error() string {
	return recordName([]byte(e.bucket), []byte(e.key)) + ": " + e.what
}

func (e *recordError) Unwrap() error { return ErrDamaged }

// isRecordError reports whether err is, or wraps, a *recordError.
func isRecordError(err error) bool {
	var re *recordError
	return errors.As(err, &re)
}

// recordName names the record under key in bucket, for errors: op "x",
// audit entry seq 7, dead letter seq 7, state of "hall_light".
func recordName(bucket, key []byte) string {
	switch string(bucket) {
	case string(bucketOps):
		return "op " + strconv.Quote(string(key))
	case string(bucketAudit):
		return "audit entry " + seqKeyName(key)
	case string(bucketDeadLetters):
		return "dead letter " + seqKeyName(key)
	case string(bucketStates):
		return "state of " + strconv.Quote(string(key))
	case string(bucketNotifications):
		return notificationName(key)
	case string(bucketMeta):
		if string(key) == string(metaQuarantine) {
			return "quarantine record"
		}
	}
	return fmt.Sprintf("record %q in bucket %s", key, bucket)
}
