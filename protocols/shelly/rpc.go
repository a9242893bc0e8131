package shelly

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Request is a JSON-RPC request frame as Shelly's "RPC Protocol" page
// documents it (https://shelly-api-docs.shelly.cloud/gen2/General/RPCProtocol):
// id matches the response, src names the caller (the response goes to
// <src>/rpc over MQTT), method is <Component>.<Verb>, params its arguments.
type Request struct {
	ID     int64          `json:"id"`
	Src    string         `json:"src"`
	Method string         `json:"method"`
	Params map[string]any `json:"params,omitempty"`
}

// Response is a response frame: the request's id, the device's ID as src,
// the caller's src as dst, and either result or error.
type Response struct {
	ID     int64
	Src    string
	Dst    string
	Result json.RawMessage
	Error  *RPCError
}

// RPCError is an error object of a response frame (code and message), as
// Shelly's "Common Errors" page lists them
// (https://shelly-api-docs.shelly.cloud/gen2/General/CommonErrors).
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Method  string `json:"-"` // the request's method, for the message
}

// Shelly's common RPC error codes, and JSON-RPC 2.0's own.
const (
	CodeInvalidArgument    = -103
	CodeDeadlineExceeded   = -104
	CodeNotFound           = -105
	CodeResourceExhausted  = -108
	CodeFailedPrecondition = -109
	CodeUnavailable        = -114
	CodeUnauthorized       = 401
	CodeNoHandler          = 404 // a method the device has no handler for
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
)

func (e *RPCError) Error() string {
	m := e.Method
	if m == "" {
		m = "RPC"
	}
	return fmt.Sprintf("shelly: %s failed on the device: %d %s (%s)", m, e.Code, e.Message, codeName(e.Code))
}

// Permanent reports whether resending the same request cannot succeed:
// an invalid argument (-103), a component not found (-105), a failed
// precondition (-109: a cover not calibrated, an input in the wrong mode;
// a person must change the device), unauthorized (401: the device wants
// digest authentication), 404 (no handler for the method: a component the
// device does not have) and JSON-RPC's parse, request, method and params
// errors. Deadline exceeded (-104), resource exhausted (-108),
// unavailable (-114) and any code not listed are transient: the device
// may take it next time.
func (e *RPCError) Permanent() bool {
	switch e.Code {
	case CodeInvalidArgument, CodeNotFound, CodeFailedPrecondition, CodeUnauthorized, CodeNoHandler,
		CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams:
		return true
	}
	return false
}

func codeName(code int) string {
	switch code {
	case CodeInvalidArgument:
		return "invalid argument"
	case CodeDeadlineExceeded:
		return "deadline exceeded"
	case CodeNotFound:
		return "not found"
	case CodeResourceExhausted:
		return "resource exhausted"
	case CodeFailedPrecondition:
		return "failed precondition"
	case CodeUnavailable:
		return "unavailable"
	case CodeUnauthorized:
		return "unauthorized"
	case CodeNoHandler:
		return "no handler"
	case CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams:
		return "JSON-RPC error"
	}
	return "unknown code"
}

// ErrBadFrame is wrapped by every error of ParseResponse and
// ParseNotification.
var ErrBadFrame = errors.New("shelly: not an RPC frame")

// ParseResponse reads a response frame: a JSON object with a numeric id
// (a whole number; Hearth sends no string ids) and a result (null
// included: Light.Set and Cover.* answer {"result": null}) or an error
// object with a whole numeric code, not both. It fails, wrapping ErrBadFrame,
// for anything else.
func ParseResponse(p []byte) (Response, error) {
	var raw struct {
		ID     json.RawMessage `json:"id"`
		Src    string          `json:"src"`
		Dst    string          `json:"dst"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Method *string         `json:"method"`
	}
	if err := json.Unmarshal(p, &raw); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if raw.Method != nil {
		return Response{}, fmt.Errorf("%w: a frame with a method is a request or notification, not a response", ErrBadFrame)
	}
	id, err := frameID(raw.ID)
	if err != nil {
		return Response{}, err
	}
	r := Response{ID: id, Src: raw.Src, Dst: raw.Dst}
	hasResult := len(raw.Result) > 0 // "result": null is a result: Light.Set, Cover.Stop answer so
	hasError := len(raw.Error) > 0 && !bytes.Equal(raw.Error, []byte("null"))
	switch {
	case hasResult && !bytes.Equal(raw.Result, []byte("null")) && hasError:
		return Response{}, fmt.Errorf("%w: a response with both result and error", ErrBadFrame)
	case hasError:
		var e struct {
			Code    *float64 `json:"code"`
			Message string   `json:"message"`
		}
		if err := json.Unmarshal(raw.Error, &e); err != nil || e.Code == nil || *e.Code != math.Trunc(*e.Code) || math.Abs(*e.Code) > 1<<31 {
			return Response{}, fmt.Errorf("%w: the error object has no whole numeric code", ErrBadFrame)
		}
		r.Error = &RPCError{Code: int(*e.Code), Message: e.Message}
	case hasResult:
		r.Result = raw.Result
	default:
		return Response{}, fmt.Errorf("%w: a response without result or error", ErrBadFrame)
	}
	return r, nil
}

// frameID reads a numeric id, a whole number of at most 2^53.
func frameID(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("%w: no id", ErrBadFrame)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("%w: id %s is not a number", ErrBadFrame, truncate(raw))
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%w: id %s is not a whole number up to 2^53", ErrBadFrame, truncate(raw))
	}
	return int64(f), nil
}

// Notification is a notification frame on <device-id>/events/rpc: a
// method (NotifyStatus, NotifyFullStatus, NotifyEvent) and, for the status
// methods, each component's (partial) status by its key ("switch:0").
type Notification struct {
	Src        string
	Method     string
	TS         float64
	Components map[string]map[string]any
}

// ParseNotification reads a notification frame, as Shelly's
// "Notifications" page documents it
// (https://shelly-api-docs.shelly.cloud/gen2/General/Notifications): a
// JSON object with a method and params; params.ts is a Unix time in
// seconds, and every other member of params that is an object is a
// component's status. It fails, wrapping ErrBadFrame, for a frame without
// a method or with params that are not an object.
func ParseNotification(p []byte) (Notification, error) {
	var raw struct {
		Src    string                     `json:"src"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(p, &raw); err != nil {
		return Notification{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if raw.Method == "" {
		return Notification{}, fmt.Errorf("%w: a notification without a method", ErrBadFrame)
	}
	n := Notification{Src: raw.Src, Method: raw.Method, Components: map[string]map[string]any{}}
	for k, v := range raw.Params {
		if k == "ts" {
			_ = json.Unmarshal(v, &n.TS)
			continue
		}
		var obj map[string]any
		if json.Unmarshal(v, &obj) == nil && obj != nil {
			n.Components[k] = obj
		}
	}
	return n, nil
}

// ParseOnline reads <device-id>/online: "true" or "false", the device's
// birth and will (Shelly's MQTT component publishes it retained).
func ParseOnline(p []byte) (online, ok bool) {
	switch strings.TrimSpace(string(p)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func truncate(p []byte) string {
	if len(p) > 120 {
		return strconv.Quote(string(p[:117]) + "...")
	}
	return string(p)
}
