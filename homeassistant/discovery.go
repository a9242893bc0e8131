package homeassistant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
)

// Discovery builds the Home Assistant MQTT discovery messages of one
// Hearth instance (see the package doc). The zero value uses every
// default.
type Discovery struct {
	// Prefix is Home Assistant's discovery prefix; "" means "homeassistant".
	Prefix string
	// NodeID names this Hearth instance in topics and ids, so two
	// instances on one broker do not clash; "" means "hearth". It should
	// match [a-zA-Z0-9_-]; other characters become "_".
	NodeID string
	// TopicPrefix is Hearth's own topic prefix; "" means "hearth".
	TopicPrefix string
	// Version is Hearth's version, shown as the device's and origin's
	// sw_version; "" leaves it out.
	Version string
}

func (d Discovery) prefix() string { return or(d.Prefix, "homeassistant") }
func (d Discovery) node() string   { return objectID(or(d.NodeID, "hearth")) }
func (d Discovery) topics() string { return or(d.TopicPrefix, "hearth") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// StatusTopic returns <Prefix>/status, where Home Assistant publishes its
// birth message: subscribe to it and, when IsBirth, announce again.
func (d Discovery) StatusTopic() string { return d.prefix() + "/status" }

// IsBirth reports whether payload, received on StatusTopic, is Home
// Assistant's birth message "online" (surrounding white space ignored);
// its will message "offline" is not.
func IsBirth(payload []byte) bool { return string(bytes.TrimSpace(payload)) == "online" }

// BridgeStateTopic returns <TopicPrefix>/bridge/state, Hearth's own
// availability ("online"/"offline", retained, also its MQTT will).
func (d Discovery) BridgeStateTopic() string { return d.topics() + "/bridge/state" }

// ServiceStateTopic returns <TopicPrefix>/services/<service>/state, where
// Hearth publishes the service's breaker state retained
// ({"state":"open","since":...}).
func (d Discovery) ServiceStateTopic(service string) string {
	return d.topics() + "/services/" + service + "/state"
}

// ServiceTopic returns the discovery config topic of service's entity:
// <Prefix>/binary_sensor/<NodeID>/service_<service>/config.
//
// Service names are restricted to [a-z0-9_-] by config, which is also what
// Home Assistant allows in a topic's node_id and object_id; any other
// character is replaced by "_" rather than producing a topic Home
// Assistant ignores.
func (d Discovery) ServiceTopic(service string) string {
	return d.configTopic("binary_sensor", "service_"+objectID(service))
}

// ServiceEntity returns the discovery config of a binary_sensor with
// device_class "problem" for service: ON (problem) when its breaker is not
// closed, OFF when it is, with the state payload's state and since as
// attributes; unavailable while Hearth's bridge state is offline. It
// belongs to one "Hearth" device per NodeID, as a diagnostic entity.
// Publish it retained, once per configured service at start-up and again
// whenever IsBirth.
func (d Discovery) ServiceEntity(service string) (topic string, payload []byte) {
	node := d.node()
	id := objectID(service)
	stateTopic := d.ServiceStateTopic(service)
	cfg := entityConfig{
		Name:            service + " problem",
		UniqueID:        "hearth_" + node + "_service_" + id,
		DefaultEntityID: "binary_sensor." + entityID(node+"_service_"+id),
		DeviceClass:     "problem",
		EntityCategory:  "diagnostic",
		StateTopic:      stateTopic,
		ValueTemplate:   "{{ 'OFF' if value_json.state == 'closed' else 'ON' }}",
		PayloadOn:       "ON",
		PayloadOff:      "OFF",
		JSONAttrsTopic:  stateTopic,
		QoS:             1,
		Availability: []availability{{
			Topic:               d.BridgeStateTopic(),
			PayloadAvailable:    "online",
			PayloadNotAvailable: "offline",
		}},
		Device: device{
			Identifiers:  []string{"hearth_" + node},
			Name:         "Hearth",
			Manufacturer: "Hearth",
			Model:        "hearthd",
			SWVersion:    d.Version,
		},
		Origin: d.origin(),
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic("health: encoding a discovery config: " + err.Error()) // only strings: cannot fail
	}
	return d.ServiceTopic(service), b
}

// entityConfig is a binary_sensor's discovery config, with the keys of
// Home Assistant's MQTT binary_sensor and discovery documentation.
type entityConfig struct {
	Name            string         `json:"name"`
	UniqueID        string         `json:"unique_id"`
	DefaultEntityID string         `json:"default_entity_id"`
	DeviceClass     string         `json:"device_class"`
	EntityCategory  string         `json:"entity_category"`
	StateTopic      string         `json:"state_topic"`
	ValueTemplate   string         `json:"value_template"`
	PayloadOn       string         `json:"payload_on"`
	PayloadOff      string         `json:"payload_off"`
	JSONAttrsTopic  string         `json:"json_attributes_topic"`
	QoS             int            `json:"qos"`
	Availability    []availability `json:"availability"`
	Device          device         `json:"device"`
	Origin          origin         `json:"origin"`
}

type availability struct {
	Topic               string `json:"topic"`
	PayloadAvailable    string `json:"payload_available,omitempty"`
	PayloadNotAvailable string `json:"payload_not_available,omitempty"`
	ValueTemplate       string `json:"value_template,omitempty"`
}

type device struct {
	Identifiers  []string    `json:"identifiers,omitempty"`
	Connections  [][2]string `json:"connections,omitempty"`
	Name         string      `json:"name"`
	Manufacturer string      `json:"manufacturer,omitempty"`
	Model        string      `json:"model,omitempty"`
	SWVersion    string      `json:"sw_version,omitempty"`
}

type origin struct {
	Name       string `json:"name"`
	SWVersion  string `json:"sw_version,omitempty"`
	SupportURL string `json:"support_url,omitempty"`
}

// origin is the origin block of every config: Hearth, at its version.
func (d Discovery) origin() origin { return origin{Name: "Hearth", SWVersion: d.Version} }

// deviceObject is a device's ID as the object_id of its entities: the ID
// itself when Home Assistant accepts it ([a-zA-Z0-9_-]), else objectID of
// it and a hash of the ID, so that two devices whose IDs differ only where
// objectID writes "_" ("Tür" and "Tör", "front door" and "front_door")
// never share an entity.
func deviceObject(id string) string {
	o := objectID(id)
	if o == id {
		return o
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%s_%08x", o, h.Sum32())
}

// objectID maps s onto [a-zA-Z0-9_-], what Home Assistant accepts as a
// node_id or object_id in a discovery topic, replacing any other
// character by "_".
func objectID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// entityID maps s onto [a-z0-9_], what Home Assistant accepts after the
// domain in an entity id: lower case, and "_" for anything else
// (including "-").
func entityID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, s)
}
