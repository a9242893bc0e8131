// Package config reads Hearth's configuration: one YAML file, turned into a
// typed, validated *Config. configs/hearth.yaml is the documented sample.
//
// It owns the file's schema, its defaults and its error messages. It never
// opens connections, creates the data directory, reads TLS files or works
// out values that depend on the host (the MQTT client ID): the daemon does
// those at start.
//
// # Errors
//
// Every problem names the file, the line and the dotted key:
//
//	configs/hearth.yaml:12: devices.hall_light.class: unknown class "lamp" (known: light, switch, …)
//
// All problems in a file are reported together, sorted by line, as an
// *Error whose Problems can be inspected one by one.
//
// # Rules of the file
//
//   - Keys are snake_case. An unknown key is an error that lists the keys
//     allowed where it stands; so is a key given twice in one mapping.
//   - A key left out, or given no value ("ttl:" or "ttl: null"), takes its
//     documented default. A value that is written must be valid: "ttl: 0s"
//     is an error, not a request for the default.
//   - Durations are Go duration strings such as "10s" or "1m30s"; a bare
//     number is an error because it has no unit.
//   - Relative paths are relative to the daemon's working directory.
//   - Anchors and aliases may be used; merge keys ("<<") may not.
package config
