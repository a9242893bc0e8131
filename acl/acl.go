package acl

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hearthd/hearth/topic"
)

// Spec is everything a Table is built from, in the configuration's terms.
// Every filter is an MQTT topic filter (MQTT 5.0 §4.7); every topic a
// topic without wildcards.
type Spec struct {
	// Prefix is Hearth's topic prefix ("hearth"): principals may publish
	// <Prefix>/+/set, the command intake, and only Hearth the rest of
	// <Prefix>/#.
	Prefix string
	// DiscoveryPrefix is Home Assistant's discovery prefix
	// ("homeassistant"), whose <DiscoveryPrefix>/status carries Home
	// Assistant's birth message, which principals may publish; "" adds no
	// such rule.
	DiscoveryPrefix string
	// Hearth is Hearth's own account, which may publish anything.
	Hearth Account
	// Bridges are the bridges Hearth commands (Zigbee2MQTT, Z-Wave JS UI).
	Bridges []Bridge
	// StatusServices are the status_topic services Hearth watches.
	StatusServices []StatusService
	// Principals are the accounts that command devices through Hearth.
	Principals []Principal
	// Users are the other accounts (mqtt.users), which may publish only
	// their Publish filters.
	Users []User
}

// Account is a username and the client IDs reserved to it: no other
// username may connect with one of them.
type Account struct {
	Username  string
	ClientIDs []string
}

// Bridge is one bridge's account: it may publish under BaseTopic
// (<BaseTopic>/#), except on Commands.
type Bridge struct {
	// Name is the service's name, for errors and role names.
	Name string
	Account
	// BaseTopic is the bridge's base topic, one or more levels.
	BaseTopic string
	// Commands are the filters of the bridge's command topics, which only
	// Hearth may publish on: zigbee2mqtt.CommandFilters,
	// zwavejs.CommandFilters.
	Commands []string
	// Topics, when set, replace <BaseTopic>/# for devices that publish
	// under no one base topic (Tasmota's stat/+/# and tele/+/#, whose
	// commands are under cmnd/+/#, tasmota.ReportFilters): the bridge may
	// publish on them, and nobody else may publish on them or on
	// Commands. BaseTopic is then unused.
	Topics []string
}

// StatusService is a status_topic service's account: it may publish
// StatusTopic only.
type StatusService struct {
	Name string
	Account
	StatusTopic string
}

// Principal is a principal's account: it may publish <Prefix>/+/set,
// <DiscoveryPrefix>/status and Publish, never elsewhere on a protected
// root.
type Principal struct {
	Name string
	Account
	Publish []string
}

// User is an mqtt.users account: it may publish Publish, never on a
// protected root.
type User struct {
	Account
	Publish []string
}

// Rule is one publish rule: topics matching Filter are allowed (Allow) or
// denied.
type Rule struct {
	Filter string
	Allow  bool
}

// Kind says what an account is for.
type Kind string

// Kinds of accounts.
const (
	KindHearth    Kind = "hearth"
	KindBridge    Kind = "bridge"
	KindStatus    Kind = "status"
	KindPrincipal Kind = "principal"
	KindUser      Kind = "user"
)

// Entry is one account of a Table with its rules, in order.
type Entry struct {
	Account
	Kind Kind
	// Name is the service's or principal's name; the username for Hearth
	// and for users.
	Name  string
	Rules []Rule
}

// Table is the access table of New. It is immutable and safe for
// concurrent use.
type Table struct {
	entries []Entry
	byUser  map[string]int
	owners  map[string]string // client ID → username
}

// New builds the table of spec. It fails, naming the account, on an empty
// username, a username used by two accounts, a client ID reserved twice,
// an invalid filter or a bridge without a base topic.
func New(spec Spec) (*Table, error) {
	t := &Table{byUser: map[string]int{}, owners: map[string]string{}}
	if spec.Prefix == "" {
		return nil, errors.New("acl: no topic prefix")
	}
	var protected []Rule
	deny := func(f string) { protected = append(protected, Rule{f, false}) }
	deny(spec.Prefix + "/#")
	for _, b := range spec.Bridges {
		if len(b.Topics) > 0 {
			for _, f := range append(slices.Clone(b.Commands), b.Topics...) {
				deny(f)
			}
			continue
		}
		if b.BaseTopic == "" {
			return nil, fmt.Errorf("acl: bridge %s has no base topic", b.Name)
		}
		deny(b.BaseTopic + "/#")
	}
	for _, s := range spec.StatusServices {
		deny(s.StatusTopic)
	}
	if spec.DiscoveryPrefix != "" {
		// A discovery config names the topic Home Assistant publishes
		// commands on: whoever writes one can make Home Assistant's own
		// principal command a device (a "switch" whose command_topic is
		// <prefix>/front_door/set with payload_on UNLOCK), or hide a
		// breaker's problem sensor. Only Home Assistant's birth
		// (<DiscoveryPrefix>/status, a principal's) is let through, by the
		// principal's rule before this one.
		deny(spec.DiscoveryPrefix + "/#")
	}
	commands := []Rule{{spec.Prefix + "/+/set", true}}
	if spec.DiscoveryPrefix != "" {
		commands = append(commands, Rule{spec.DiscoveryPrefix + "/status", true})
	}

	if err := t.add(Entry{Account: spec.Hearth, Kind: KindHearth, Name: spec.Hearth.Username, Rules: []Rule{{"#", true}}}); err != nil {
		return nil, err
	}
	for _, b := range spec.Bridges {
		var rules []Rule
		for _, f := range b.Commands {
			rules = append(rules, Rule{f, false})
		}
		if len(b.Topics) > 0 {
			rules = append(rules, allowAll(b.Topics)...)
		} else {
			rules = append(rules, Rule{b.BaseTopic + "/#", true})
		}
		if err := t.add(Entry{Account: b.Account, Kind: KindBridge, Name: b.Name, Rules: rules}); err != nil {
			return nil, err
		}
	}
	for _, s := range spec.StatusServices {
		if err := t.add(Entry{Account: s.Account, Kind: KindStatus, Name: s.Name, Rules: []Rule{{s.StatusTopic, true}}}); err != nil {
			return nil, err
		}
	}
	for _, p := range spec.Principals {
		rules := append(append([]Rule{}, commands...), protected...)
		rules = append(rules, allowAll(p.Publish)...)
		if err := t.add(Entry{Account: p.Account, Kind: KindPrincipal, Name: p.Name, Rules: rules}); err != nil {
			return nil, err
		}
	}
	for _, u := range spec.Users {
		rules := append(append([]Rule{}, protected...), allowAll(u.Publish)...)
		if err := t.add(Entry{Account: u.Account, Kind: KindUser, Name: u.Username, Rules: rules}); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func allowAll(filters []string) []Rule {
	rules := make([]Rule, len(filters))
	for i, f := range filters {
		rules[i] = Rule{f, true}
	}
	return rules
}

// add appends e, checking its username, client IDs and filters.
func (t *Table) add(e Entry) error {
	what := fmt.Sprintf("%s %s", e.Kind, e.Name)
	if e.Username == "" {
		return fmt.Errorf("acl: %s has no username", what)
	}
	if i, taken := t.byUser[e.Username]; taken {
		o := t.entries[i]
		return fmt.Errorf("acl: %s: username %q is already the account of %s %s", what, e.Username, o.Kind, o.Name)
	}
	for _, r := range e.Rules {
		if err := topic.ValidFilter(r.Filter); err != nil {
			return fmt.Errorf("acl: %s: %w", what, err)
		}
	}
	for _, id := range e.ClientIDs {
		if id == "" {
			return fmt.Errorf("acl: %s: empty client ID", what)
		}
		if o, taken := t.owners[id]; taken {
			return fmt.Errorf("acl: %s: client ID %q is already reserved to %q", what, id, o)
		}
		t.owners[id] = e.Username
	}
	t.byUser[e.Username] = len(t.entries)
	t.entries = append(t.entries, e)
	return nil
}

// MayPublish reports whether username may publish on the topic name:
// the first rule of its account whose filter matches name (topic.Match)
// decides; no match, or an unknown username, denies.
func (t *Table) MayPublish(username, name string) bool {
	i, ok := t.byUser[username]
	if !ok {
		return false
	}
	for _, r := range t.entries[i].Rules {
		if topic.Match(r.Filter, name) {
			return r.Allow
		}
	}
	return false
}

// ClientIDOwner returns the username clientID is reserved to, and whether
// it is reserved at all.
func (t *Table) ClientIDOwner(clientID string) (string, bool) {
	u, ok := t.owners[clientID]
	return u, ok
}

// ClientIDOwners returns every reserved client ID and its username, a new
// map (for broker.Options.ClientIDOwners).
func (t *Table) ClientIDOwners() map[string]string {
	m := make(map[string]string, len(t.owners))
	for id, u := range t.owners {
		m[id] = u
	}
	return m
}

// Entries returns the table's accounts in Spec order (Hearth, bridges,
// status services, principals, users), each with its rules in order. The
// slices are the caller's.
func (t *Table) Entries() []Entry {
	out := make([]Entry, len(t.entries))
	for i, e := range t.entries {
		e.Rules = append([]Rule(nil), e.Rules...)
		e.ClientIDs = append([]string(nil), e.ClientIDs...)
		out[i] = e
	}
	return out
}
