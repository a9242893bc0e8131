package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hearthd/hearth/devices"
)

// MaxDeadLetterLimit is the largest limit GET /api/v1/deadletters accepts,
// in dead letters.
const MaxDeadLetterLimit = 1000

// DeadLetterQuery selects dead letters; it is what GET
// /api/v1/deadletters's query parameters say. Zero fields select
// everything; set filters are exact matches combined with AND.
type DeadLetterQuery struct {
	// Device keeps dead letters of that device.
	Device string
	// Status and Reason keep dead letters whose op ended with them.
	Status devices.Status
	Reason devices.Reason
	// Principal, if set, keeps dead letters of that principal's commands.
	Principal string
	// After is a Seq cursor: only dead letters with Seq > After.
	After uint64
	// Since, if not zero, keeps dead letters whose op ended (UpdatedAt)
	// at or after it.
	Since time.Time
	// Limit is the most dead letters to return, 1 to MaxDeadLetterLimit;
	// 0 means the source's default (100 for the store).
	Limit int
	// Newest asks for the last Limit matching dead letters instead of the
	// first Limit after the cursor; either way they come in ascending Seq
	// order.
	Newest bool
}

// DeadLetterSource is what the API reads the dead-letter store from.
// hearthd adapts its store (store.Store.DeadLetters) to it. DeadLetters
// returns the matching dead letters in ascending Seq order, at most
// q.Limit of them.
type DeadLetterSource interface {
	DeadLetters(q DeadLetterQuery) ([]devices.DeadLetter, error)
}

// DeadLetterPage is the body of a 200 answer of GET /api/v1/deadletters.
type DeadLetterPage struct {
	// DeadLetters are in ascending Seq order; [] (never null) when none
	// match.
	DeadLetters []devices.DeadLetter `json:"dead_letters"`
	// NextAfter is the Seq of the last dead letter, to pass as after= for
	// the next page or to poll for new ones; when none matched, it is the
	// request's after (0 if none).
	NextAfter uint64 `json:"next_after"`
}

// deadLetterStatuses are the statuses a dead letter can have.
var deadLetterStatuses = []devices.Status{devices.Failed, devices.Expired, devices.Superseded}

// RegisterDeadLetters adds GET /api/v1/deadletters to mux: the dead-letter
// store, commands that ended without success and will never be attempted
// again (devices.DeadLetter), read from src.
//
// Query parameters, each at most once: device, status (failed, expired
// or superseded), reason (exact matches), after (a Seq: dead
// letters after it), since (RFC 3339: dead letters whose op ended at or
// after it), limit (1 to 1000; default 100), newest (true: the last limit
// dead letters rather than the first after the cursor). The answer is 200
// with a DeadLetterPage: {"dead_letters":[...],"next_after":N}. A bad,
// repeated or unknown parameter is 400 invalid_parameter, whose detail
// starts with the parameter's name, and an error from src is 500
// store_error.
//
// With principals, one that seesAll does not allow (nil: everyone is)
// reads only the dead letters of its own commands, as GET /api/v1/ops
// lists them.
func RegisterDeadLetters(mux *http.ServeMux, src DeadLetterSource, seesAll func(principal string) bool) {
	mux.Handle("GET /api/v1/deadletters", paged[devices.DeadLetter]{
		filters:  []filter{{name: "device"}, {name: "status", check: checkDeadLetterStatus}, {name: "reason"}},
		maxLimit: MaxDeadLetterLimit,
		what:     "dead letters",
		seesAll:  seesAll,
		read: func(v url.Values, p pageQuery) ([]devices.DeadLetter, error) {
			return src.DeadLetters(DeadLetterQuery{
				Device: v.Get("device"), Status: devices.Status(v.Get("status")), Reason: devices.Reason(v.Get("reason")), Principal: p.principal,
				After: p.after, Since: p.since, Limit: p.limit, Newest: p.newest,
			})
		},
		seq: func(d devices.DeadLetter) uint64 { return d.Seq },
		page: func(dead []devices.DeadLetter, nextAfter uint64) any {
			return DeadLetterPage{DeadLetters: dead, NextAfter: nextAfter}
		},
	})
}

// checkDeadLetterStatus refuses a status= that no dead letter can have.
func checkDeadLetterStatus(s string) error {
	if !slices.Contains(deadLetterStatuses, devices.Status(s)) {
		return fmt.Errorf("%q is not a dead letter's status (failed, expired or superseded)", s)
	}
	return nil
}
