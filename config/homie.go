package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ProtocolHomie is the protocol of a service of devices that follow the
// Homie convention (homieiot.github.io), version 4 or 5
// (protocols/homie; docs/HOMIE.md). base_topic is the root: one level
// for Homie 4 ("homie", the default), <domain>/5 for Homie 5 ("homie/5").
const ProtocolHomie = "homie"

// Wi-Fi has no radio layer that retries for Hearth: 3 attempts
// (devices.Transport.DefaultAttempts), 5 s each, the rest as for the
// bridges.
func init() {
	protocols[ProtocolHomie] = Service{
		BaseTopic:   "homie",
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
	protocolNames = append(protocolNames, ProtocolHomie)
	slices.Sort(protocolNames)
}

// homieID checks a Homie topic level ID as protocols/homie.ValidID does
// (config may not import it; a test of cmd/hearthd keeps the two in
// step): a–z, 0–9 and '-', not starting or ending with '-' (Homie 4.0.0,
// "Topic IDs").
func homieID(id string) error {
	if id == "" {
		return fmt.Errorf("an empty ID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("ID %q: a Homie ID has only a-z, 0-9 and '-' (%q at byte %d)", id, c, i)
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return fmt.Errorf("ID %q: a Homie ID does not start or end with '-'", id)
	}
	return nil
}

// checkHomieBase reports a homie service's base_topic that is no Homie
// root: one level (Homie 4) or <domain>/5 (Homie 5), each level a Homie
// ID.
func (w *walker) checkHomieBase(key string, s Service) {
	k := join(key, "base_topic")
	if w.reported[k] || s.BaseTopic == "" { // "" takes the default, homie
		return
	}
	_, line := w.at(k, key)
	levels := strings.Split(s.BaseTopic, "/")
	for _, l := range levels {
		if err := homieID(l); err != nil {
			w.reportf(line, k, "%q is no Homie root topic: %v", s.BaseTopic, err)
			return
		}
	}
	if len(levels) > 2 || (len(levels) == 2 && levels[1] != "5") {
		w.reportf(line, k, "%q is neither a Homie 4 root (one level: homie) nor a Homie 5 root (<domain>/5: homie/5)", s.BaseTopic)
	}
}

// homieAddress reads the address of a device of class c on a homie
// service as protocols/homie.ParseAddress does:
// <device-id>/<node-id>/<property-id> for a switch (its boolean on/off),
// <device-id>/<node-id>/<on-property>[,<brightness-property>] for a light.
// It returns the key of its first property, so that two devices on one
// property are found, or what is wrong.
func homieAddress(addr string, c devices.Class) (string, error) {
	if c != devices.Switch && c != devices.Light {
		return "", fmt.Errorf("a %s cannot be a Homie device here: Hearth commands Homie switches and lights (Homie has no fresh read for locks, garage doors and valves, and no standard cover)", c)
	}
	parts := strings.Split(addr, "/")
	if len(parts) != 3 {
		return "", fmt.Errorf("%q is not a Homie address: write <device-id>/<node-id>/<property-id> (kitchen-light/light/power)", addr)
	}
	props := strings.Split(parts[2], ",")
	switch {
	case c == devices.Switch && len(props) > 1:
		return "", fmt.Errorf("%q: a switch names one property, its boolean on/off (power)", addr)
	case len(props) > 2:
		return "", fmt.Errorf("%q: a light names at most two properties, <on-property>,<brightness-property> (power,brightness)", addr)
	}
	for i, id := range append([]string{parts[0], parts[1]}, props...) {
		what := [...]string{"device", "node", "property", "property"}[i]
		if err := homieID(id); err != nil {
			return "", fmt.Errorf("%q: the %s %v", addr, what, err)
		}
	}
	if len(props) == 2 && props[0] == props[1] {
		return "", fmt.Errorf("%q: the on and brightness properties are one property", addr)
	}
	return parts[0] + "/" + parts[1] + "/" + props[0], nil
}
