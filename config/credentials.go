package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/devices"
)

// CredentialsFileName is the name of the credentials file in the data
// directory.
const CredentialsFileName = "credentials.yaml"

// CredentialsHeader is the comment at the top of the credentials file.
const CredentialsHeader = "Written by hearthd. Show: hearthctl credentials. Rotate: hearthctl credentials rotate NAME, then SIGHUP hearthd."

// Credentials are the secrets hearthd generated, as the credentials file
// <data_dir>/credentials.yaml holds them:
//
//	services:
//	  zigbee: {mqtt_username: zigbee, mqtt_password: <base64url of 24 random bytes>}
//	principals:
//	  default: {mqtt_username: default, mqtt_password: ..., http_token: ...}
//	hearthd: {mqtt_password: ...}
//
// hearthd writes it at start for every account of the config that has no
// password (EnsureCredentials), and never rewrites an entry but to add a
// missing one; hearthctl credentials rotate replaces one. A password in
// the config file wins over the file's (ApplyCredentials).
type Credentials struct {
	// Services are the MQTT services' accounts, in file order.
	Services []ServiceCredentials
	// Principals are the generated principals' credentials: only
	// DefaultPrincipal, when the config names no principals.
	Principals []PrincipalCredentials
	// HearthdPassword is the password Hearth connects to an external
	// broker with when mqtt.password is empty (its username is
	// mqtt.username, or "hearthd"). "" when not generated.
	HearthdPassword string
}

// ServiceCredentials are one service's MQTT account.
type ServiceCredentials struct {
	Name         string
	MQTTUsername string
	MQTTPassword string
}

// PrincipalCredentials are a generated principal's MQTT account and HTTP
// bearer token.
type PrincipalCredentials struct {
	Name         string
	MQTTUsername string
	MQTTPassword string
	HTTPToken    string
}

// Service returns the credentials of the service called name.
func (c *Credentials) Service(name string) (ServiceCredentials, bool) {
	for _, s := range c.Services {
		if s.Name == name {
			return s, true
		}
	}
	return ServiceCredentials{}, false
}

// Principal returns the credentials of the principal called name.
func (c *Credentials) Principal(name string) (PrincipalCredentials, bool) {
	for _, p := range c.Principals {
		if p.Name == name {
			return p, true
		}
	}
	return PrincipalCredentials{}, false
}

// CredentialsPath returns the credentials file of the data directory dir.
func CredentialsPath(dir string) string { return filepath.Join(dir, CredentialsFileName) }

// ErrCredentialsExposed is wrapped by LoadCredentials's error when the
// file may be read or written by the file's group or by others.
var ErrCredentialsExposed = errors.New("readable or writable by group or others")

// LoadCredentials reads and parses the credentials file at path. A missing
// file is an error for which errors.Is(err, fs.ErrNotExist) holds. A file
// whose mode lets group or others read or write it is refused, wrapping
// ErrCredentialsExposed, before it is read. A file that is read but wrong
// is an *Error naming path, line and key.
func LoadCredentials(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read credentials file: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: the credentials file is %w (mode %#o); it holds every account's password: chmod 600 %s, and check who read it", path, ErrCredentialsExposed, perm, path)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read credentials file: %w", path, err)
	}
	return ParseCredentials(path, data)
}

// ParseCredentials parses data, the text of the credentials file called
// name. An empty file is no credentials. Unknown keys, values that are not
// strings, passwords shorter than MinPasswordLength and tokens shorter
// than MinTokenLength are problems of an *Error, each naming name, line
// and dotted key.
func ParseCredentials(name string, data []byte) (*Credentials, error) {
	w := newWalker(name)
	c := &Credentials{}
	root := w.document(data)
	if root != nil {
		w.mapping(root, "",
			field{"services", func(w *walker, n *yaml.Node, key string) {
				w.entries(n, key, func(name string, v *yaml.Node, k string) {
					s := ServiceCredentials{Name: name}
					w.mapping(v, k,
						value("mqtt_username", &s.MQTTUsername, notEmpty, mqttName),
						value("mqtt_password", &s.MQTTPassword, minLength(MinPasswordLength)),
					)
					w.required(k, "mqtt_username", s.MQTTUsername == "")
					w.required(k, "mqtt_password", s.MQTTPassword == "")
					c.Services = append(c.Services, s)
				})
			}},
			field{"principals", func(w *walker, n *yaml.Node, key string) {
				w.entries(n, key, func(name string, v *yaml.Node, k string) {
					p := PrincipalCredentials{Name: name}
					w.mapping(v, k,
						value("mqtt_username", &p.MQTTUsername, notEmpty, mqttName),
						value("mqtt_password", &p.MQTTPassword, minLength(MinPasswordLength)),
						value("http_token", &p.HTTPToken, minLength(MinTokenLength)),
					)
					w.required(k, "mqtt_username", p.MQTTUsername == "")
					w.required(k, "mqtt_password", p.MQTTPassword == "")
					w.required(k, "http_token", p.HTTPToken == "")
					c.Principals = append(c.Principals, p)
				})
			}},
			section("hearthd",
				value("mqtt_password", &c.HearthdPassword, minLength(MinPasswordLength)),
			),
		)
	}
	if err := w.result(); err != nil {
		return nil, err
	}
	return c, nil
}

// Marshal returns the text of the credentials file: CredentialsHeader as
// a comment, then services, principals and hearthd, each account on one
// line in YAML's flow style.
func (c *Credentials) Marshal() []byte {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	flow := func(kv ...string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Content = append(n.Content, str(kv[i]), str(kv[i+1]))
		}
		return n
	}
	root := &yaml.Node{Kind: yaml.MappingNode, HeadComment: "# " + CredentialsHeader}
	if len(c.Services) > 0 {
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, s := range c.Services {
			m.Content = append(m.Content, str(s.Name), flow("mqtt_username", s.MQTTUsername, "mqtt_password", s.MQTTPassword))
		}
		root.Content = append(root.Content, str("services"), m)
	}
	if len(c.Principals) > 0 {
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, p := range c.Principals {
			m.Content = append(m.Content, str(p.Name), flow("mqtt_username", p.MQTTUsername, "mqtt_password", p.MQTTPassword, "http_token", p.HTTPToken))
		}
		root.Content = append(root.Content, str("principals"), m)
	}
	if c.HearthdPassword != "" {
		root.Content = append(root.Content, str("hearthd"), flow("mqtt_password", c.HearthdPassword))
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		panic(fmt.Sprintf("config: marshal credentials: %v", err)) // only strings: cannot fail
	}
	enc.Close()
	return out.Bytes()
}

// WriteCredentials writes c to path atomically with mode 0600 (see
// WriteFileAtomic).
func WriteCredentials(path string, c *Credentials) error {
	if err := WriteFileAtomic(path, c.Marshal(), 0o600); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	return nil
}

// WriteFileAtomic writes data to path with mode perm: into a temporary
// file in the same directory, synced, then renamed over path, and the
// directory synced, so that a crash leaves the old file or the new one,
// never half of either.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// SecretBytes is how many random bytes a generated password or token
// holds: 24, 32 characters of base64url.
const SecretBytes = 24

// NewSecret draws a password or token from random (crypto/rand.Reader in
// hearthd): SecretBytes bytes, base64url without padding.
func NewSecret(random io.Reader) (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("draw a secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// NeedsDefaultPrincipal reports whether c gets the generated principal
// DefaultPrincipal: when it names no principals and at least one of MQTT
// and HTTP authenticates.
func (c *Config) NeedsDefaultPrincipal() bool {
	return len(c.Principals) == 0 && !(c.MQTT.AllowAnonymous && c.HTTP.AllowAnonymous)
}

// NeedsHearthdPassword reports whether Hearth needs a generated password:
// with an external broker and no mqtt.password.
func (c *Config) NeedsHearthdPassword() bool { return c.MQTT.URL != "" && c.MQTT.Password == "" }

// EnsureCredentials adds to cr an account, with secrets drawn from random,
// for every account of c that has no password: each MQTT service without
// mqtt_password, DefaultPrincipal when NeedsDefaultPrincipal, Hearth's
// own when NeedsHearthdPassword. It keeps every entry cr already has, and
// keeps a service's entry's username in step with the config. It returns
// the names of what it added or changed ("services.zigbee",
// "principals.default", "hearthd"); none means cr needs no writing.
func (c *Config) EnsureCredentials(cr *Credentials, random io.Reader) ([]string, error) {
	var changed []string
	for _, s := range c.Services {
		if !s.UsesMQTT() || s.MQTTPassword != "" {
			continue
		}
		i := slices.IndexFunc(cr.Services, func(e ServiceCredentials) bool { return e.Name == s.Name })
		if i >= 0 {
			if cr.Services[i].MQTTUsername != s.MQTTUsername {
				cr.Services[i].MQTTUsername = s.MQTTUsername
				changed = append(changed, join("services", s.Name))
			}
			continue
		}
		pw, err := NewSecret(random)
		if err != nil {
			return nil, err
		}
		cr.Services = append(cr.Services, ServiceCredentials{Name: s.Name, MQTTUsername: s.MQTTUsername, MQTTPassword: pw})
		changed = append(changed, join("services", s.Name))
	}
	if _, ok := cr.Principal(DefaultPrincipal); !ok && c.NeedsDefaultPrincipal() {
		pw, err := NewSecret(random)
		if err != nil {
			return nil, err
		}
		token, err := NewSecret(random)
		if err != nil {
			return nil, err
		}
		cr.Principals = append(cr.Principals, PrincipalCredentials{Name: DefaultPrincipal, MQTTUsername: DefaultPrincipal, MQTTPassword: pw, HTTPToken: token})
		changed = append(changed, join("principals", DefaultPrincipal))
	}
	if cr.HearthdPassword == "" && c.NeedsHearthdPassword() {
		pw, err := NewSecret(random)
		if err != nil {
			return nil, err
		}
		cr.HearthdPassword = pw
		changed = append(changed, "hearthd")
	}
	return changed, nil
}

// ApplyCredentials fills c from cr: each MQTT service's password that the
// config leaves out, DefaultPrincipal (allow "*": ["*"], with the
// MQTT account and token of cr) when NeedsDefaultPrincipal, and Hearth's
// password for an external broker when NeedsHearthdPassword (username
// "hearthd" unless mqtt.username says). Passwords in the config win.
// Call it after EnsureCredentials, so that cr holds every account.
func (c *Config) ApplyCredentials(cr *Credentials) {
	for i := range c.Services {
		s := &c.Services[i]
		if !s.UsesMQTT() || s.MQTTPassword != "" {
			continue
		}
		if e, ok := cr.Service(s.Name); ok {
			s.MQTTPassword = e.MQTTPassword
		}
	}
	if p, ok := cr.Principal(DefaultPrincipal); ok && c.NeedsDefaultPrincipal() {
		c.Principals = append(c.Principals, Principal{
			Name:         DefaultPrincipal,
			MQTTUsername: p.MQTTUsername,
			MQTTPassword: p.MQTTPassword,
			HTTPToken:    p.HTTPToken,
			Allow:        devices.Grants{devices.ActionAny: {devices.ActionAny}},
		})
		c.GeneratedPrincipal = true
	}
	if c.NeedsHearthdPassword() && cr.HearthdPassword != "" {
		c.MQTT.Password = cr.HearthdPassword
		if c.MQTT.Username == "" {
			c.MQTT.Username = InternalUsername
		}
	}
}
