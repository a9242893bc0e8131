// Package homeassistant is how Hearth shows itself to Home Assistant: MQTT
// discovery configs that make every configured device an entity of its
// class (lock, light, switch, cover, climate) whose commands go through
// Hearth's intake, an event entity per device that fires on each command's
// outcome, Hearth's own diagnostic entities (a "problem" binary_sensor per
// service), the sweep that removes the entities of services and devices no
// longer configured, and the state a lock or cover entity shows while a
// command is under way (LOCKING, opening, …), derived from Hearth's own
// topics.
//
// It follows Home Assistant's documented MQTT discovery
// (https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery): each
// entity's config is published retained on
// <prefix>/<component>/<node_id>/<object_id>/config, an empty retained
// payload there removes the entity, and Home Assistant's birth message
// "online" on <prefix>/status asks for every config again. The keys of each
// platform are those of Home Assistant core's MQTT platform schemas; a
// test checks every key sent against a list taken from them
// (testdata/ha_mqtt_schema.json).
//
// It never talks MQTT and holds no state of its own beyond View's: it builds
// topics and payloads for the caller to publish (QoS 1, retained), and
// decides from messages the caller hands it.
package homeassistant
