package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ProtocolESPHome is the protocol of a service of ESPHome nodes that
// Hearth commands over ESPHome's MQTT component (protocols/esphome;
// docs/ESPHOME.md). Each node's topic_prefix is <base_topic>/<node>;
// base_topic defaults to "esphome".
const ProtocolESPHome = "esphome"

// Wi-Fi has no radio layer that retries for Hearth: 3 attempts, 5 s each.
// read_back is on: ESPHome never repeats an unchanged state, so a command
// to the state a node is in already is confirmed by the read after the
// unconfirmed attempt (the node's live state), not by a report.
func init() {
	protocols[ProtocolESPHome] = Service{
		BaseTopic:   "esphome",
		ReadTimeout: 5 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    3,
				AttemptTimeout: 5 * time.Second,
				Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second},
				MaxRetryAfter:  retry.DefaultMaxRetryAfter,
			},
			Budget:   Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
			ReadBack: true,
		},
		Breaker: defaultBreaker,
	}
	protocolNames = append(protocolNames, ProtocolESPHome)
	slices.Sort(protocolNames)
}

// esphomeAddress checks the address of a device of class c on an esphome
// service as the adapter reads it (protocols/esphome.ParseAddress, which
// config may not import; a test of cmd/hearthd keeps the two in step):
// <node>/<component>/<object_id>, the component the class's (switch,
// light, cover, lock).
func esphomeAddress(addr string, c devices.Class) error {
	want, ok := map[devices.Class]string{devices.Switch: "switch", devices.Light: "light", devices.Cover: "cover", devices.Lock: "lock"}[c]
	if !ok {
		return fmt.Errorf("a %s is not an ESPHome switch, light, cover or lock", c)
	}
	parts := strings.Split(addr, "/")
	if len(parts) != 3 {
		return fmt.Errorf("%q is not an ESPHome address: write <node>/%s/<object_id> (the node's topic_prefix being <base_topic>/<node>)", addr, want)
	}
	switch node, comp, id := parts[0], parts[1], parts[2]; {
	case node == "":
		return fmt.Errorf("%q: the node is empty", addr)
	case strings.ContainsAny(node, "+#\x00"):
		return fmt.Errorf("%q: a node is one topic level, without '+', '#' or NUL", addr)
	case comp != want:
		return fmt.Errorf("%q: a %s is ESPHome component %s, not %q", addr, c, want, comp)
	case id == "" || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "":
		return fmt.Errorf("%q: object_id %q is not ESPHome's (lower-case letters, digits, '_' and '-': the entity's name in snake case)", addr, id)
	}
	return nil
}
