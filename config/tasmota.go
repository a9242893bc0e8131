package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ProtocolTasmota is the protocol of a service that is a set of Tasmota
// devices, each its own MQTT client, reached on their FullTopic
// (full_topic, default DefaultTasmotaFullTopic). A device's address on it
// is its Tasmota Topic, with "/<n>" for relay (POWER<n>) or shutter
// (ShutterPosition<n>) n from 1 to MaxTasmotaIndex. Every device of the
// service logs in with the service's account (mqtt_username).
const ProtocolTasmota = "tasmota"

// DefaultTasmotaFullTopic is Tasmota's default FullTopic.
const DefaultTasmotaFullTopic = "%prefix%/%topic%/"

// MaxTasmotaIndex is the highest relay or shutter index of a Tasmota
// address: protocols/tasmota.MaxIndex (config imports no protocol; a test
// in cmd/hearthd keeps the two equal).
const MaxTasmotaIndex = 8

// Tasmota's devices have no radio layer that retries for them (Wi-Fi,
// then MQTT): 3 attempts, the Transport's DefaultAttempts.
func init() {
	protocols[ProtocolTasmota] = Service{
		FullTopic:   DefaultTasmotaFullTopic,
		ReadTimeout: 5 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    3,
				AttemptTimeout: 5 * time.Second,
				Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second},
				MaxRetryAfter:  retry.DefaultMaxRetryAfter,
			},
			Budget: Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
		},
		Breaker: defaultBreaker,
	}
	protocolNames = append(protocolNames, ProtocolTasmota)
	slices.Sort(protocolNames)
}

// tasmotaFullTopic checks a full_topic as protocols/tasmota.ParseFullTopic
// does: %prefix% and %topic% once each, each a whole level; other levels
// literal, without '%'.
func tasmotaFullTopic(s string) error {
	if len(s) > 100 {
		return fmt.Errorf("%q is longer than Tasmota's 100 characters", s)
	}
	if err := topicLevels(strings.TrimSuffix(s, "/")); err != nil {
		return err
	}
	var prefix, topic int
	for _, l := range strings.Split(strings.TrimSuffix(s, "/"), "/") {
		switch {
		case l == "%prefix%":
			prefix++
		case l == "%topic%":
			topic++
		case strings.Contains(l, "%"):
			return fmt.Errorf("%q: level %q: Hearth takes only %%prefix%% and %%topic%%, each as a whole level (it cannot know a device's %%hostname%% or %%id%%)", s, l)
		}
	}
	if prefix != 1 || topic != 1 {
		return fmt.Errorf("%q must hold %%prefix%% and %%topic%% once each, as whole levels (Tasmota's default is %s)", s, DefaultTasmotaFullTopic)
	}
	return nil
}

// tasmotaFilters returns the filters of a tasmota service's topics under
// fullTopic: its commands (cmnd, any Topic) and its reports (stat, tele),
// as protocols/tasmota.CommandFilters and ReportFilters give them.
func tasmotaFilters(fullTopic string) []string {
	levels := strings.Split(strings.TrimSuffix(fullTopic, "/"), "/")
	var out []string
	for _, p := range []string{"cmnd", "stat", "tele"} {
		l := slices.Clone(levels)
		for i := range l {
			switch l[i] {
			case "%prefix%":
				l[i] = p
			case "%topic%":
				l[i] = "+"
			}
		}
		out = append(out, strings.Join(l, "/")+"/#")
	}
	return out
}

// tasmotaAddress reads the address of a device of class c on a tasmota
// service as protocols/tasmota.ParseAddress does, and returns the key of
// the relay or shutter it names ("<topic>#<n>", n 1 for none), so that
// "dual" and "dual/1", the same relay, are found taken, or what is wrong.
// A light is its Topic alone (Dimmer and CT have no index); lock, climate
// and sensor devices are not carried over Tasmota.
func tasmotaAddress(addr string, c devices.Class) (string, error) {
	switch c {
	case devices.Switch, devices.Light, devices.Cover:
	default:
		return "", fmt.Errorf("a %s cannot be reached over Tasmota: Hearth carries switches (POWER<n>), lights (POWER, Dimmer, CT) and covers (ShutterPosition<n>)", c)
	}
	topic, idx, hasIndex := strings.Cut(addr, "/")
	switch {
	case topic == "":
		return "", fmt.Errorf("%q has no Tasmota Topic: write <topic> or <topic>/<relay>", addr)
	case len(topic) > 32:
		return "", fmt.Errorf("Topic %q is longer than Tasmota's 32 characters", topic)
	case strings.ContainsAny(topic, "+#%") || strings.ContainsFunc(topic, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return "", fmt.Errorf("Topic %q holds a wildcard, '%%', a space or a control character", topic)
	}
	n := 1
	if hasIndex {
		var err error
		n, err = strconv.Atoi(idx)
		if err != nil || n < 1 || n > MaxTasmotaIndex || strconv.Itoa(n) != idx {
			return "", fmt.Errorf("%q: the relay or shutter %q is not a number from 1 to %d; write <topic> or <topic>/<relay>", addr, idx, MaxTasmotaIndex)
		}
		if c == devices.Light {
			return "", fmt.Errorf("%q: a Tasmota light is addressed by its Topic alone (its Dimmer and CT have no relay index)", addr)
		}
	}
	return topic + "#" + strconv.Itoa(n), nil
}

// checkTasmotaKeys reports the keys a tasmota service does not take
// (base_topic: its FullTopic replaces it) and a full_topic on another
// protocol.
func (w *walker) checkTasmotaKeys(key string, s Service) {
	if s.Protocol == "" || w.reported[join(key, "protocol")] {
		return
	}
	if k := join(key, "full_topic"); s.Protocol != ProtocolTasmota && w.lines[k] != 0 && !w.reported[k] {
		w.reportf(w.lines[k], k, "only for protocol tasmota, not %s", s.Protocol)
	}
	if k := join(key, "base_topic"); s.Protocol == ProtocolTasmota && w.lines[k] != 0 && !w.reported[k] {
		w.reportf(w.lines[k], k, "a tasmota service takes no base_topic: its devices' topics follow full_topic (default %s)", DefaultTasmotaFullTopic)
	}
}
