package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
)

// MaxOpsLimit is the largest limit GET /api/v1/ops accepts, in ops.
const MaxOpsLimit = 1000

// DefaultOpsLimit is GET /api/v1/ops's limit when none is given.
const DefaultOpsLimit = 50

// OpsQuery selects stored commands; it is what GET /api/v1/ops's query
// parameters say, with the principal the listing is for. Zero fields
// select everything; set filters are exact matches combined with AND.
type OpsQuery struct {
	Device    string
	Principal string
	// Status keeps ops with that stored status; Pending, ops not ended.
	Status  devices.Status
	Pending bool
	// Since, if not zero, keeps ops last updated ("at") at or after it.
	Since time.Time
	// Before is a Seq cursor: ops accepted before the op of that Seq; 0
	// means from the newest.
	Before uint64
	// Limit is the most ops to return, 1 to MaxOpsLimit.
	Limit int
}

// OpsSource is what the API lists stored commands from; hearthd adapts
// its store (store.Store.Ops). Ops returns the matching ops newest (by
// Seq) first, at most q.Limit, and whether more match after them.
type OpsSource interface {
	Ops(q OpsQuery) (ops []devices.Op, more bool, err error)
}

// OpSummary is one op of GET /api/v1/ops: the stored command as a result
// (devices.Result, as GET /api/v1/ops/{op_id} answers) and when it was
// accepted.
type OpSummary struct {
	devices.Result
	AcceptedAt time.Time `json:"accepted_at"`
}

// OpsPage is the body of a 200 answer of GET /api/v1/ops.
type OpsPage struct {
	// Ops are newest first; [] (never null) when none match.
	Ops []OpSummary `json:"ops"`
	// Next is the cursor of the next page (pass it as before=), "" when
	// this page is the last.
	Next string `json:"next"`
}

// opStatuses are the values status= takes: every status, and pending.
var opStatuses = []string{"accepted", "queued", "succeeded", "failed", "expired", "superseded", "rejected", "pending"}

// ParseOpsQuery reads GET /api/v1/ops's query parameters, each at most
// once: device, status (a status, or pending: not ended), since (RFC
// 3339), limit (1 to MaxOpsLimit; DefaultOpsLimit when not given) and
// before (a cursor from a page's next). Another parameter is an error;
// every error starts with the parameter's name.
func ParseOpsQuery(v url.Values) (OpsQuery, error) {
	q := OpsQuery{Limit: DefaultOpsLimit}
	if err := checkParams(v, []string{"device", "status", "since", "limit", "before"}); err != nil {
		return q, err
	}
	if s := v.Get("device"); s != "" {
		if err := devices.ValidID(s); err != nil {
			return q, fmt.Errorf("device: %w", err)
		}
		q.Device = s
	}
	switch s := v.Get("status"); {
	case s == "":
	case s == "pending":
		q.Pending = true
	case slices.Contains(opStatuses, s):
		q.Status = devices.Status(s)
	default:
		return q, fmt.Errorf("status: %q is not one of %s", s, strings.Join(opStatuses, ", "))
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("since: %q is not an RFC 3339 time such as 2026-11-29T19:00:00Z", s)
		}
		q.Since = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxOpsLimit {
			return q, fmt.Errorf("limit: %q is not a number from 1 to %d", s, MaxOpsLimit)
		}
		q.Limit = n
	}
	if s := v.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return q, fmt.Errorf("before: %q is not a cursor (a page's next)", s)
		}
		q.Before = n
	}
	return q, nil
}

// OpsList is what GET /api/v1/ops uses.
type OpsList struct {
	Source OpsSource
	// SeesAll reports whether principal may list every principal's
	// commands; one that may not sees only its own, as GET
	// /api/v1/ops/{op_id} shows a principal only its own. nil: nobody
	// but the open API ("") sees all.
	SeesAll func(principal string) bool
	Logger  *slog.Logger
}

// RegisterOps adds GET /api/v1/ops to mux: the stored commands, recent
// and pending, newest first, a page at a time, filtered by the query
// (ParseOpsQuery). 200 with an OpsPage, {"ops":[…],"next":"…"}; a bad,
// repeated or unknown parameter is 400 invalid_parameter whose detail
// starts with its name; an error of the store is 500 store_error. Rejected
// commands are never stored, and a command waiting (for a sleepy device,
// an open breaker) is stored accepted: status=queued and status=rejected
// match none. It serves only requests that passed Authenticate.
//
// It panics without a Source, a wiring mistake.
func RegisterOps(mux *http.ServeMux, o OpsList) {
	if o.Source == nil {
		panic("api: RegisterOps needs an OpsSource")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("GET /api/v1/ops", func(w http.ResponseWriter, r *http.Request) {
		principal, ok := principalOf(r)
		if !ok {
			o.Logger.Error("the ops API is served without api.Authenticate: refusing", "path", r.URL.Path)
			writeError(w, http.StatusInternalServerError, "not_authenticated", "the server is misconfigured: its API is not behind authentication")
			return
		}
		q, err := ParseOpsQuery(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_parameter", err.Error())
			return
		}
		if principal != "" && (o.SeesAll == nil || !o.SeesAll(principal)) {
			q.Principal = principal
		}
		ops, more, err := o.Source.Ops(q)
		if err != nil {
			o.Logger.Error("list ops", "err", err)
			writeError(w, http.StatusInternalServerError, "store_error", "the command store could not be read")
			return
		}
		page := OpsPage{Ops: make([]OpSummary, 0, len(ops))}
		for _, op := range ops {
			page.Ops = append(page.Ops, OpSummary{Result: op.Result(), AcceptedAt: op.AcceptedAt})
		}
		if more && len(ops) > 0 {
			page.Next = strconv.FormatUint(ops[len(ops)-1].Seq, 10)
		}
		writeJSON(w, http.StatusOK, page)
	})
}
