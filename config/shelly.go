package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ProtocolShelly is the protocol of a service of Shelly Gen2+ devices
// (Plus, Pro, Gen3) that Hearth commands over their MQTT RPC channel
// (protocols/shelly; docs/SHELLY.md). Each device's MQTT topic prefix is
// <base_topic>/<device-id>; base_topic defaults to "shelly".
const ProtocolShelly = "shelly"

// Wi-Fi has no radio layer that retries for Hearth: 3 attempts
// (devices.Transport.DefaultAttempts), 5 s each, the rest as for the
// bridges.
func init() {
	protocols[ProtocolShelly] = Service{
		BaseTopic:   "shelly",
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
	protocolNames = append(protocolNames, ProtocolShelly)
	slices.Sort(protocolNames)
}

// shellyAddress reads the address of a device of class c on a shelly
// service as the adapter does (protocols/shelly.ParseAddress, which config
// may not import; a test of cmd/hearthd keeps the two in step):
// <device-id>, <device-id>/<component>:<n>, or, for a garage door opener
// (a cover on a relay), <device-id>/switch:<n>[/input:<m>]. It returns the
// device and component as one key ("<device-id>/switch:0"), so that two
// devices on one component are found however their addresses are
// written, or what is wrong.
func shellyAddress(addr string, c devices.Class) (string, error) {
	parts := strings.Split(addr, "/")
	if len(parts) > 3 {
		return "", fmt.Errorf("%q is not a Shelly address: write <device-id> or <device-id>/<component>:<n> (shellyplus1pm-a8032ab12345/switch:0)", addr)
	}
	id := parts[0]
	switch {
	case id == "":
		return "", fmt.Errorf("%q: the Shelly device ID is empty", addr)
	case id == "hearth":
		return "", fmt.Errorf("%q: hearth is the topic level of Hearth's own RPC source (<base_topic>/hearth/<service>), not a device", addr)
	case strings.ContainsAny(id, "+#\x00"):
		return "", fmt.Errorf("%q: a Shelly device ID is one topic level, without '+', '#' or NUL", addr)
	}
	defaults := map[devices.Class]string{devices.Switch: "switch", devices.Light: "light", devices.Cover: "cover"}
	if len(parts) == 1 {
		kind, ok := defaults[c]
		if !ok {
			return "", fmt.Errorf("a %s is not a Shelly switch, light or cover (class switch, light or cover)", c)
		}
		return id + "/" + kind + ":0", nil
	}
	kind, n, err := shellyComponent(parts[1])
	if err != nil {
		return "", fmt.Errorf("%q: %v", addr, err)
	}
	garage := c == devices.Cover && kind == "switch"
	switch {
	case c == devices.Switch && kind == "switch", c == devices.Light && (kind == "light" || kind == "switch"),
		c == devices.Cover && kind == "cover", garage:
	default:
		return "", fmt.Errorf("%q: a %s cannot be a Shelly %s (a switch is switch:<n>; a light light:<n> or switch:<n>; a cover cover:<n>, or switch:<n> for a garage door opener with its contact on input:<n>)", addr, c, kind)
	}
	if len(parts) == 3 {
		ik, _, err := shellyComponent(parts[2])
		if err != nil {
			return "", fmt.Errorf("%q: %v", addr, err)
		}
		if ik != "input" || !garage {
			return "", fmt.Errorf("%q: only a garage door opener (a cover on switch:<n>) takes a third level, its contact input:<m>", addr)
		}
	}
	return id + "/" + kind + ":" + strconv.Itoa(n), nil
}

func shellyComponent(s string) (string, int, error) {
	kind, n, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("component %q is not <component>:<n> (switch:0)", s)
	}
	switch kind {
	case "switch", "light", "cover", "input":
	default:
		return "", 0, fmt.Errorf("component %q: Hearth commands Shelly switch, light and cover components (and reads input)", kind)
	}
	if n == "" || len(n) > 3 || strings.Trim(n, "0123456789") != "" {
		return "", 0, fmt.Errorf("component %q: the instance is not a number 0–999", s)
	}
	v, _ := strconv.Atoi(n)
	return kind, v, nil
}
