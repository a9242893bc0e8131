package broker

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// authenticator is the broker's authentication and publish hook: it admits
// a CONNECT by Options.Users (SetUsers), refuses a publish that
// Options.DenyPublish denies, and stamps every publish and will with the
// publisher's username (Options.StampUsernameProperty).
//
// It decides in OnConnect, before the accept guard, rather than in mochi's
// OnConnectAuthenticate: mochi answers a refusal there to a 3.1.1 client
// with return code 0x05 "not authorized", where 3.1.1 has 0x04 "bad user
// name or password" for it, and reports it to nobody. Its
// OnConnectAuthenticate and OnACLCheck then admit everything.
type authenticator struct {
	mqtt.HookBase
	srv      *mqtt.Server
	guard    *guard
	stampKey string
	deny     func(username, topic string) bool
	owners   map[string]string // client ID → the only username that may use it
	logins   *throttledLog     // refused logins
	denials  *throttledLog     // refused publishes
	log      *slog.Logger
	// loginFailed, if set, is told the remote address of every CONNECT
	// refused for its credentials (the failed-login guard's budget).
	loginFailed func(remote string)

	mu sync.RWMutex
	// users maps each username to the SHA-256 of its password, so that
	// every comparison takes the same time whatever the password's
	// length; empty: everyone is admitted, nobody is verified.
	users map[string][sha256.Size]byte
	// clients holds, per connection the authenticator admitted and mochi
	// still serves, what its CONNECT said.
	clients map[net.Conn]*login
}

// login is one admitted CONNECT.
type login struct {
	cl       *mqtt.Client
	username string
	password [sha256.Size]byte
	// verified: the username and password are in the table. A client
	// admitted while the table was empty is not verified.
	verified bool
}

func newAuthenticator(srv *mqtt.Server, g *guard, opts Options, log *slog.Logger) *authenticator {
	a := &authenticator{
		srv:      srv,
		guard:    g,
		stampKey: opts.StampUsernameProperty,
		deny:     opts.DenyPublish,
		owners:   maps.Clone(opts.ClientIDOwners),
		log:      log,
		logins:   &throttledLog{clock: g.clock, log: log, msg: "embedded broker refused a login: bad username or password"},
		denials:  &throttledLog{clock: g.clock, log: log, msg: "embedded broker refused a publish or CONNECT: not authorized"},
		users:    hashUsers(opts.Users),
		clients:  map[net.Conn]*login{},
	}
	return a
}

func hashUsers(users map[string]string) map[string][sha256.Size]byte {
	h := make(map[string][sha256.Size]byte, len(users))
	for u, p := range users {
		h[u] = sha256.Sum256([]byte(p))
	}
	return h
}

// ID names the hook in mochi.
func (a *authenticator) ID() string { return "hearth-authenticator" }

// Provides says which hooks the authenticator implements: OnPublish and
// OnWill only when it stamps or denies publishes.
func (a *authenticator) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck:
		return true
	case mqtt.OnPublish, mqtt.OnWill:
		return a.stampKey != "" || a.deny != nil
	}
	return false
}

// OnConnectAuthenticate admits every client: OnConnect has decided.
func (a *authenticator) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

// OnACLCheck allows every topic: DenyPublish is applied in OnPublish,
// where a topic alias is already resolved to its topic.
func (a *authenticator) OnACLCheck(*mqtt.Client, string, bool) bool { return true }

// admits reports whether the table admits username with the password of
// that hash. Call with mu held.
func (a *authenticator) admits(username string, password [sha256.Size]byte) bool {
	want, known := a.users[username]
	if !known {
		want = password // spend the same time on an unknown user
	}
	return subtle.ConstantTimeCompare(password[:], want[:]) == 1 && known
}

// OnConnect admits a CONNECT, or refuses it with CONNACK "bad username or
// password" (0x86 to MQTT 5, 0x04 to 3.1.1), or, for a will on a topic
// DenyPublish denies, a client ID reserved to another user or the client
// ID of a connected client verified as another user, "not authorized"
// (0x87 / 0x05).
func (a *authenticator) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	c := pk.Connect
	l := &login{cl: cl, username: string(c.Username), password: sha256.Sum256(c.Password)}
	willDenied := a.deny != nil && c.WillFlag && a.deny(l.username, c.WillTopic)
	owner, reserved := a.owners[cl.ID]
	idDenied := reserved && owner != l.username
	a.mu.Lock()
	enforced := len(a.users) > 0
	l.verified = enforced && c.UsernameFlag && a.admits(l.username, l.password)
	takeover := l.verified && a.takesOverLocked(cl.ID, l.username)
	idDenied = idDenied || takeover
	admitted := !enforced || (l.verified && !willDenied && !idDenied)
	if admitted {
		a.clients[cl.Net.Conn] = l
	}
	a.mu.Unlock()
	if admitted {
		return nil
	}

	v5 := cl.Properties.ProtocolVersion >= 5
	if !l.verified {
		reason := "unknown user or wrong password"
		if !c.UsernameFlag {
			reason = "no username"
		}
		a.logins.warn("username", printable(l.username), "remote", cl.Net.Remote, "client_id", cl.ID, "reason", reason)
		if a.loginFailed != nil {
			a.loginFailed(cl.Net.Remote)
		}
		code := byte(0x04) // 3.1.1: bad user name or password
		if v5 {
			code = packets.ErrBadUsernameOrPassword.Code // 0x86
		}
		a.guard.refuse(cl, a.guard.clock.Now(), RefusedCredentials, func() { writeConnack(cl, code) })
		return errRefused
	}
	switch {
	case takeover:
		a.denials.warn("username", printable(l.username), "client_id", printable(cl.ID), "remote", cl.Net.Remote, "what", "client ID of a connected client of another user")
	case idDenied:
		a.denials.warn("username", printable(l.username), "client_id", printable(cl.ID), "remote", cl.Net.Remote, "what", "reserved client ID")
	default:
		a.denials.warn("username", printable(l.username), "topic", printable(c.WillTopic), "remote", cl.Net.Remote, "what", "will")
	}
	code := packets.Err3NotAuthorized.Code // 0x05
	if v5 {
		code = packets.ErrNotAuthorized.Code // 0x87
	}
	a.guard.refuse(cl, a.guard.clock.Now(), RefusedNotAuthorized, func() { writeConnack(cl, code) })
	return errRefused
}

// takesOverLocked reports whether a CONNECT of username with clientID
// would take over the session of a connected client that the table
// verified as another username: MQTT lets a CONNECT with a connected
// client's ID throw that client off (MQTT 5.0 §3.1.4-3), which would let
// any account throw a bridge off the broker, again and again. Call with
// mu held.
func (a *authenticator) takesOverLocked(clientID, username string) bool {
	existing, ok := a.srv.Clients.Get(clientID)
	if !ok || existing.Closed() || existing.Net.Conn == nil {
		return false
	}
	l, ok := a.clients[existing.Net.Conn]
	return ok && l.verified && l.username != username
}

// writeConnack writes a CONNACK that refuses with code, which is the
// client's protocol version's own.
func writeConnack(cl *mqtt.Client, code byte) {
	cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: code})
}

// forget drops the login of conn: mochi has finished with it.
func (a *authenticator) forget(conn net.Conn) {
	a.mu.Lock()
	delete(a.clients, conn)
	a.mu.Unlock()
}

// identity returns the username cl connected with and whether the table
// verified it.
func (a *authenticator) identity(cl *mqtt.Client) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if l, ok := a.clients[cl.Net.Conn]; ok {
		return l.username, l.verified
	}
	return "", false
}

// setUsers replaces the table and disconnects every client it no longer
// admits, with DISCONNECT 0x87 "not authorized" to MQTT 5 clients.
func (a *authenticator) setUsers(users map[string]string) {
	table := hashUsers(users)
	var revoked []*login
	a.mu.Lock()
	a.users = table
	for _, l := range a.clients {
		switch {
		case len(table) == 0:
			l.verified = false
		case a.admits(l.username, l.password):
			l.verified = true
		default:
			l.verified = false
			revoked = append(revoked, l)
		}
	}
	a.mu.Unlock()
	for _, l := range revoked {
		a.log.Info("embedded broker disconnected a client whose username or password no longer holds",
			"username", printable(l.username), "client_id", l.cl.ID, "remote", l.cl.Net.Remote)
		// An in-memory connection has no kernel buffer: a client that has
		// stopped reading would block the DISCONNECT forever.
		l.cl.Net.Conn.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		a.srv.DisconnectClient(l.cl, packets.ErrNotAuthorized)
	}
}

// OnPublish refuses a publish that DenyPublish denies, and stamps the
// others.
//
// A refused publish reaches nobody and is not retained. It is answered as
// MQTT answers a refusal: at QoS 1, PUBACK 0x87 "not authorized" to an
// MQTT 5 client, a plain PUBACK to a 3.1.1 client (which has no way to
// hear a refusal and would otherwise resend it forever); at QoS 2, the
// usual PUBREC (mochi's flow for an ignored message).
func (a *authenticator) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	username, verified := a.identity(cl)
	if verified && a.deny != nil && a.deny(username, pk.TopicName) {
		a.denials.warn("username", printable(username), "topic", printable(pk.TopicName), "remote", cl.Net.Remote, "what", "publish")
		switch pk.FixedHeader.Qos {
		case 0:
			return pk, packets.ErrRejectPacket
		case 1:
			ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID}
			if cl.Properties.ProtocolVersion >= 5 {
				ack.ReasonCode = packets.ErrNotAuthorized.Code
			}
			cl.WritePacket(ack)
			return pk, packets.ErrRejectPacket
		default:
			return pk, packets.CodeSuccessIgnore
		}
	}
	if a.stampKey != "" {
		if !verified {
			username = ""
		}
		pk.Properties.User = a.stamp(pk.Properties.User, username)
	}
	return pk, nil
}

// OnWill stamps a will as OnPublish stamps a publish; a will on a denied
// topic never gets this far (OnConnect refuses the CONNECT).
func (a *authenticator) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if a.stampKey != "" {
		username, verified := a.identity(cl)
		if !verified {
			username = ""
		}
		will.User = a.stamp(will.User, username)
	}
	return will, nil
}

// stamp returns props less every property named the stamp key, plus one
// with username unless it is "". It never changes props itself, which the
// packet may share.
func (a *authenticator) stamp(props []packets.UserProperty, username string) []packets.UserProperty {
	if username == "" && !slices.ContainsFunc(props, func(p packets.UserProperty) bool { return p.Key == a.stampKey }) {
		return props // the common case without Users: nothing to do
	}
	out := make([]packets.UserProperty, 0, len(props)+1)
	for _, p := range props {
		if p.Key != a.stampKey {
			out = append(out, p)
		}
	}
	if username != "" {
		out = append(out, packets.UserProperty{Key: a.stampKey, Val: username})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stop logs what the throttled logs still hold.
func (a *authenticator) stop() {
	a.logins.stop()
	a.denials.stop()
}

// printable bounds a client-chosen string for a log line: at most 64
// bytes, and invalid UTF-8 shown as such by the handler's quoting.
func printable(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}

// throttledLog logs a warning at most once per second of its clock; the
// warnings in between are counted in the next line's "suppressed", and
// stop logs how many are left.
type throttledLog struct {
	clock clockwork.Clock
	log   *slog.Logger
	msg   string

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *throttledLog) warn(args ...any) {
	l.mu.Lock()
	now := l.clock.Now()
	if !l.last.IsZero() && now.Sub(l.last) < refusalInterval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.suppressed, l.last = 0, now
	l.mu.Unlock()
	l.log.Warn(l.msg, append(args, "suppressed", n)...)
}

func (l *throttledLog) stop() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(l.msg, "suppressed", n)
	}
}
