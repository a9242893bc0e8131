package zigbee2mqtt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// MaxBridgeDevicesBytes is the largest bridge/devices message the adapter
// reads: 16 MiB, room for a few thousand devices (an entry with its
// exposes is 2–10 KiB). A larger one is dropped with a warning.
const MaxBridgeDevicesBytes = 16 << 20

// maxExposeDepth bounds how deep exposes nest (a light's features are one
// level, a composite's features two): deeper ones are not read.
const maxExposeDepth = 8

// BridgeDevice is one entry of Zigbee2MQTT's retained <base>/bridge/devices
// message (lib/extension/bridge.ts, publishDevices; documented in "MQTT
// Topics and Messages", zigbee2mqtt/bridge/devices): the fields Hearth
// reads.
type BridgeDevice struct {
	IEEEAddress  string `json:"ieee_address"`
	FriendlyName string `json:"friendly_name"`
	// Type is "Coordinator", "Router", "EndDevice" (or "Unknown", "GreenPower").
	Type string `json:"type"`
	// Definition is nil for the coordinator and for devices Zigbee2MQTT
	// does not support.
	Definition *Definition `json:"definition"`
}

// Definition is a device's definition: its model and what it exposes.
type Definition struct {
	Model       string   `json:"model"`
	Vendor      string   `json:"vendor"`
	Description string   `json:"description"`
	Exposes     []Expose `json:"exposes"`
}

// Expose is one expose, as Zigbee2MQTT's "Exposes" page documents it
// (https://www.zigbee2mqtt.io/guide/usage/exposes.html): a specific one
// (type light, switch, lock, cover, climate, fan) groups generic features;
// a generic one (binary, numeric, enum, text, composite, list) is a
// property.
type Expose struct {
	Type     string   `json:"type"`
	Name     string   `json:"name"`
	Property string   `json:"property"`
	Endpoint string   `json:"endpoint"`
	Access   int      `json:"access"`
	ValueMin *float64 `json:"value_min"`
	ValueMax *float64 `json:"value_max"`
	// ValueStep is a numeric's step.
	ValueStep *float64 `json:"value_step"`
	// Values are an enum's values (strings, sometimes numbers).
	Values   []any    `json:"values"`
	ValueOn  any      `json:"value_on"`
	ValueOff any      `json:"value_off"`
	Unit     string   `json:"unit"`
	Features []Expose `json:"features"`
}

// ParseBridgeDevices parses a <base>/bridge/devices payload: a JSON array
// of BridgeDevice. An error says what is wrong; an entry that is not an
// object, or whose fields have the wrong types, fails the whole message
// (Zigbee2MQTT publishes the list in one piece, so a broken one is not
// Zigbee2MQTT's).
func ParseBridgeDevices(payload []byte) ([]BridgeDevice, error) {
	if len(payload) > MaxBridgeDevicesBytes {
		return nil, fmt.Errorf("bridge/devices is %d bytes; the limit is %d", len(payload), MaxBridgeDevicesBytes)
	}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '[' {
		return nil, fmt.Errorf("bridge/devices is not a JSON array")
	}
	var out []BridgeDevice
	if err := json.Unmarshal(p, &out); err != nil {
		return nil, fmt.Errorf("bridge/devices: %w", err)
	}
	return out, nil
}

// Capabilities returns what the definition's exposes say the device can
// do: every generic expose, those inside specific ones too, as one
// devices.Property (a composite such as a light's color is one property
// whose Features are its parts). An expose without a property (a
// specific one's own entry, a malformed one) adds none. nil for a nil
// definition.
func (d *Definition) Capabilities() *devices.Capabilities {
	if d == nil {
		return nil
	}
	var props []devices.Property
	var walk func(es []Expose, depth int)
	walk = func(es []Expose, depth int) {
		if depth > maxExposeDepth {
			return
		}
		for _, e := range es {
			if e.Type != string(devices.KindComposite) && e.Type != string(devices.KindList) && len(e.Features) > 0 {
				walk(e.Features, depth+1) // light, switch, lock, cover, climate, fan
				continue
			}
			if p, ok := property(e); ok {
				props = append(props, p)
			}
		}
	}
	walk(d.Exposes, 0)
	return devices.NewCapabilities(d.Model, d.Vendor, d.Description, props)
}

func property(e Expose) (devices.Property, bool) {
	if e.Property == "" || e.Access < 0 || e.Access > 7 {
		return devices.Property{}, false
	}
	p := devices.Property{
		Name:     e.Property,
		Base:     e.Property,
		Endpoint: e.Endpoint,
		Kind:     devices.Kind(e.Type),
		Access:   devices.Access(e.Access),
		Unit:     e.Unit,
		ValueOn:  e.ValueOn,
		ValueOff: e.ValueOff,
	}
	if e.Endpoint != "" {
		if base, ok := strings.CutSuffix(e.Property, "_"+e.Endpoint); ok && base != "" {
			p.Base = base
		}
	}
	if e.ValueMin != nil && finite(*e.ValueMin) {
		p.Min, p.HasMin = *e.ValueMin, true
	}
	if e.ValueMax != nil && finite(*e.ValueMax) {
		p.Max, p.HasMax = *e.ValueMax, true
	}
	if p.HasMin && p.HasMax && p.Min > p.Max {
		p.HasMin, p.HasMax = false, false // nonsense: no range rather than an empty one
	}
	if e.ValueStep != nil && finite(*e.ValueStep) && *e.ValueStep > 0 {
		p.Step = *e.ValueStep
	}
	for _, v := range e.Values {
		switch v := v.(type) {
		case string:
			p.Values = append(p.Values, v)
		case float64:
			p.Values = append(p.Values, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	if p.Kind == devices.KindComposite {
		for _, f := range e.Features {
			if f.Property != "" {
				p.Features = append(p.Features, f.Property)
			}
		}
	}
	return p, true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
