// Package acl is Hearth's MQTT access table: which account may publish on
// which topic, and which client identifiers are reserved to which account,
// so that Hearth is the only path to a device (DESIGN.md, principle 12).
//
// A Table is built from a plain Spec (New), which cmd/hearthd fills from
// the configuration and the adapter packages' command filters. Each account
// has an ordered list of publish rules, MQTT topic filters each allowing or
// denying: the first rule whose filter matches a topic decides, and a topic
// no rule matches is denied. An unknown username may publish nothing.
//
// The accounts and their rules (Spec's fields say where each filter comes
// from):
//
//	Hearth itself            allow #
//	a bridge                 deny its command filters, allow <base>/#
//	a status_topic service   allow its status topic
//	a principal              allow <prefix>/+/set and <discovery>/status, deny every
//	                         protected root, allow its extra filters
//	an mqtt.users account    deny every protected root, allow its publish filters
//
// where the protected roots are <prefix>/#, every bridge's <base>/# and
// every status topic. Subscriptions are not restricted: every
// authenticated account may subscribe to anything (#).
//
// The package owns the decision only. It never reads the configuration,
// never talks to a broker and never sees a message: the embedded broker
// asks MayPublish and ClientIDOwner (broker.Options.DenyPublish and
// ClientIDOwners), and MosquittoDynamicSecurity renders the same table for
// an external Mosquitto 2.
package acl
