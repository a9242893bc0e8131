package acl

import (
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
)

// Mosquitto 2's dynamic-security plugin hashes passwords with
// PBKDF2-HMAC-SHA512 into 64 bytes, with a 12-byte salt and, by default,
// 101 iterations (mosquitto 2.0 src/password_mosq.h: SALT_LEN,
// PW_DEFAULT_ITERATIONS; plugins/dynamic-security/auth.c). The file
// carries the iteration count, so Hearth may use more: it uses
// DynsecIterations.
const (
	dynsecSaltLen = 12
	dynsecHashLen = 64
	// DynsecIterations is the PBKDF2 iteration count of the passwords
	// DynamicSecurity writes.
	DynsecIterations = 10000
)

// dynsecFile is the JSON file of Mosquitto 2's dynamic-security plugin
// (plugin_opt_config_file), as the plugin reads and writes it.
type dynsecFile struct {
	DefaultACLAccess map[string]bool `json:"defaultACLAccess"`
	Clients          []dynsecClient  `json:"clients"`
	Groups           []any           `json:"groups"`
	Roles            []dynsecRole    `json:"roles"`
}

type dynsecClient struct {
	Username   string           `json:"username"`
	TextName   string           `json:"textname,omitempty"`
	ClientID   string           `json:"clientid,omitempty"`
	Password   string           `json:"password"`
	Salt       string           `json:"salt"`
	Iterations int              `json:"iterations"`
	Roles      []dynsecRoleName `json:"roles"`
}

type dynsecRoleName struct {
	Rolename string `json:"rolename"`
}

type dynsecRole struct {
	Rolename string      `json:"rolename"`
	TextName string      `json:"textname,omitempty"`
	ACLs     []dynsecACL `json:"acls"`
}

type dynsecACL struct {
	ACLType  string `json:"acltype"`
	Topic    string `json:"topic"`
	Priority int    `json:"priority"`
	Allow    bool   `json:"allow"`
}

// DynamicSecurity renders the table as the configuration file of
// Mosquitto 2's dynamic-security plugin, indented JSON: one client and one
// role per account (role "hearth-<kind>-<name>"), whose publishClientSend
// ACLs are the account's rules with priorities falling in rule order (the
// plugin checks a role's ACLs from the highest priority down and the first
// match decides), plus subscribePattern "#" allowed; defaultACLAccess
// denies any publish no ACL allows and allows receiving, subscribing and
// unsubscribing. Passwords are hashed as the plugin stores them
// (PBKDF2-SHA512, 12 random bytes of salt from random, DynsecIterations).
//
// passwords maps each username to its password; an account without one
// is an error naming it. A client keeps the first of its reserved client
// IDs as the plugin's "clientid", which makes Mosquitto refuse that
// username under any other client ID; it does not keep other usernames
// off that client ID (see docs/SAFETY.md).
func (t *Table) DynamicSecurity(passwords map[string]string, random io.Reader) ([]byte, error) {
	f := dynsecFile{
		DefaultACLAccess: map[string]bool{
			"publishClientSend":    false,
			"publishClientReceive": true,
			"subscribe":            true,
			"unsubscribe":          true,
		},
		Clients: []dynsecClient{},
		Groups:  []any{},
		Roles:   []dynsecRole{},
	}
	for _, e := range t.entries {
		pw, ok := passwords[e.Username]
		if !ok || pw == "" {
			return nil, fmt.Errorf("acl: %s %s (username %q) has no password", e.Kind, e.Name, e.Username)
		}
		salt := make([]byte, dynsecSaltLen)
		if _, err := io.ReadFull(random, salt); err != nil {
			return nil, fmt.Errorf("acl: draw a salt: %w", err)
		}
		hash, err := pbkdf2.Key(sha512.New, pw, salt, DynsecIterations, dynsecHashLen)
		if err != nil {
			return nil, fmt.Errorf("acl: hash the password of %q: %w", e.Username, err)
		}
		role := fmt.Sprintf("hearth-%s-%s", e.Kind, e.Name)
		if e.Kind == KindHearth {
			role = "hearth"
		}
		c := dynsecClient{
			Username:   e.Username,
			TextName:   fmt.Sprintf("%s %s (written by hearthd -print-mosquitto-acl)", e.Kind, e.Name),
			Password:   base64.StdEncoding.EncodeToString(hash),
			Salt:       base64.StdEncoding.EncodeToString(salt),
			Iterations: DynsecIterations,
			Roles:      []dynsecRoleName{{role}},
		}
		if len(e.ClientIDs) > 0 {
			c.ClientID = e.ClientIDs[0]
		}
		f.Clients = append(f.Clients, c)
		r := dynsecRole{Rolename: role, ACLs: []dynsecACL{}}
		for i, rule := range e.Rules {
			r.ACLs = append(r.ACLs, dynsecACL{ACLType: "publishClientSend", Topic: rule.Filter, Priority: len(e.Rules) - i, Allow: rule.Allow})
		}
		r.ACLs = append(r.ACLs, dynsecACL{ACLType: "subscribePattern", Topic: "#", Priority: 0, Allow: true})
		f.Roles = append(f.Roles, r)
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
