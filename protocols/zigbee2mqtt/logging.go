package zigbee2mqtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hearthd/hearth/protocols/mqtt"
)

// Zigbee2MQTT publishes every log line at info level and above on
// <base_topic>/bridge/logging as {"message","level","namespace"}
// (lib/extension/bridge.ts, bridgeLogging; the shape is
// Zigbee2MQTTAPI["bridge/logging"] in lib/types/api.ts). A set that
// reached Zigbee2MQTT but could not be delivered to the device (no
// route, no ACK from the device, a coordinator timeout) is logged there
// at level "error" by lib/extension/publish.ts as
//
//	Publish '<type>' '<attribute>' to '<friendly_name>' failed: '<error>'
//
// with <type> "set" or "get". Zigbee2MQTT does not publish a payload equal
// to the one it published last, so a second identical failure in a row
// (the same error for the same attribute) never reaches this topic; that
// attempt ends at its timeout, as before.

// LoggingTopic is the level under the base topic where Zigbee2MQTT
// publishes its log.
const LoggingTopic = "bridge/logging"

// PublishFailure is one failed publish that Zigbee2MQTT logged.
type PublishFailure struct {
	// Type is "set" or "get": the command topic the message came on.
	Type string
	// Attribute is the attribute whose converter failed ("state").
	Attribute string
	// Entity is the friendly_name (or group name) it was published to.
	Entity string
	// Reason is Zigbee2MQTT's error text, as it quoted it.
	Reason string
}

// FailureSink is a Sink that also takes the sets Zigbee2MQTT reported
// failed; the dispatcher implements it. The adapter passes a trusted
// failure of a set to a configured device to it; a Sink without it gets
// none.
type FailureSink interface {
	// SendFailed passes a failure of device's set (Hearth's device ID)
	// for attribute, as the bridge reported it, after it took the set.
	SendFailed(device, attribute string, err error)
}

// SetFailedError is a set that Zigbee2MQTT took but reported failed on its
// bridge/logging topic. It is transient for Hearth's retry policy
// (retry.Classify finds no class in it): the device may answer the next
// time.
type SetFailedError struct {
	Failure PublishFailure
}

func (e *SetFailedError) Error() string {
	return fmt.Sprintf("zigbee2mqtt: publish %s %s to %q failed: %s", e.Failure.Type, e.Failure.Attribute, e.Failure.Entity, e.Failure.Reason)
}

// errNotFailure is ParseLogging's answer for a log line that is no failed
// publish: nothing to do.
var errNotFailure = errors.New("not a failed publish")

// ParseLogging reads a bridge/logging payload and returns the failed
// publish it reports. ok is false, with a nil error, for any other log
// line (another level, another message); err says why a payload is not a
// bridge/logging message at all (not a JSON object, no string message or
// level). known, when not nil, reports whether a friendly_name is one the
// caller knows: a name holding "' failed: '" itself is split where the
// known name ends.
func ParseLogging(payload []byte, known func(name string) bool) (f PublishFailure, ok bool, err error) {
	var msg struct {
		Message   *string `json:"message"`
		Level     *string `json:"level"`
		Namespace string  `json:"namespace"`
	}
	if err := json.Unmarshal(payload, &msg); err != nil {
		return PublishFailure{}, false, fmt.Errorf("zigbee2mqtt: bridge/logging payload is not a JSON object: %w", err)
	}
	if msg.Message == nil || msg.Level == nil {
		return PublishFailure{}, false, errors.New(`zigbee2mqtt: bridge/logging payload lacks a string "message" or "level"`)
	}
	if *msg.Level != "error" {
		return PublishFailure{}, false, nil
	}
	f, err = parsePublishFailure(*msg.Message, known)
	if errors.Is(err, errNotFailure) {
		return PublishFailure{}, false, nil
	}
	return f, err == nil, err
}

// parsePublishFailure splits publish.ts's message; an optional
// "<namespace>: " prefix, as the log file writes it, is allowed.
func parsePublishFailure(m string, known func(string) bool) (PublishFailure, error) {
	if i := strings.Index(m, "Publish '"); i > 0 && strings.HasSuffix(m[:i], ": ") {
		m = m[i:]
	}
	rest, ok := strings.CutPrefix(m, "Publish '")
	if !ok {
		return PublishFailure{}, errNotFailure
	}
	typ, rest, ok := strings.Cut(rest, "' '")
	if !ok || (typ != "set" && typ != "get") {
		return PublishFailure{}, errNotFailure
	}
	attr, rest, ok := strings.Cut(rest, "' to '")
	if !ok || attr == "" {
		return PublishFailure{}, errNotFailure
	}
	const failed = "' failed: '"
	if !strings.HasSuffix(rest, "'") {
		return PublishFailure{}, errNotFailure
	}
	rest = rest[:len(rest)-1]
	// The first split whose name is known wins; without one, the first.
	first := -1
	for i := 0; i+len(failed) <= len(rest); i++ {
		j := strings.Index(rest[i:], failed)
		if j < 0 {
			break
		}
		i += j
		if first < 0 {
			first = i
		}
		if known != nil && known(rest[:i]) {
			first = i
			break
		}
	}
	if first <= 0 {
		return PublishFailure{}, errNotFailure
	}
	return PublishFailure{Type: typ, Attribute: attr, Entity: rest[:first], Reason: rest[first+len(failed):]}, nil
}

// handleLogging passes a trusted failed set to a configured device on to
// the sink, if it takes failures (FailureSink). Other log lines, failed
// gets (a read's answer is waited for anyway) and other devices are
// dropped; an unreadable payload is logged at debug level: the log is
// Zigbee2MQTT's, not a contract.
func (a *Adapter) handleLogging(m mqtt.Message) {
	fs, takes := a.sink.(FailureSink)
	if !takes || m.Retained {
		return // a retained log line is old news
	}
	f, ok, err := ParseLogging(m.Payload, func(name string) bool { _, known := a.byName[name]; return known })
	if err != nil {
		a.log.Debug("zigbee2mqtt: unreadable bridge/logging message", "payload", truncate(m.Payload), "err", err)
		return
	}
	if !ok || f.Type != "set" {
		return
	}
	id, known := a.byName[f.Entity]
	if !known || !a.trust.Trusted(m) {
		return
	}
	a.log.Info("zigbee2mqtt: the bridge reported a set failed", "device", id, "attribute", f.Attribute, "reason", f.Reason)
	fs.SendFailed(id, f.Attribute, &SetFailedError{Failure: f})
}
