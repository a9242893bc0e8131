package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/topic"
)

// Checks of single values. Each returns an error whose text follows the
// dotted key in a problem, so it does not repeat the key.

var errEmpty = errors.New("must not be empty (leave the key out for the default)")

func notEmpty(s string) error {
	if s == "" {
		return errEmpty
	}
	return nil
}

func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", fmtDuration(d))
	}
	return nil
}

// safetyLevel checks a device's safety key: critical, or normal (the
// default, in which the class decides).
func safetyLevel(s string) error {
	switch s {
	case "critical", "normal":
		return nil
	}
	return fmt.Errorf("must be critical or normal, got %q", s)
}

// offlinePolicy checks a device's offline key: fail or queue.
func offlinePolicy(s string) error {
	if _, err := devices.ParseOffline(s); err != nil {
		return fmt.Errorf("must be fail or queue, got %q", s)
	}
	return nil
}

func ttl(d time.Duration) error {
	if err := positive(d); err != nil {
		return err
	}
	if d > devices.MaxTTL {
		return fmt.Errorf("must be at most %s (30 days), got %s", fmtDuration(devices.MaxTTL), fmtDuration(d))
	}
	return nil
}

func keepAlive(d time.Duration) error {
	if err := positive(d); err != nil {
		return err
	}
	if d%time.Second != 0 {
		return fmt.Errorf("must be whole seconds, as MQTT counts it, got %s", fmtDuration(d))
	}
	if d > MaxKeepAlive {
		return fmt.Errorf("must be at most %s, as MQTT counts it in 16 bits, got %s", fmtDuration(MaxKeepAlive), fmtDuration(d))
	}
	return nil
}

func sessionExpiry(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must be 0 (a clean session at every connect) or more, got %s", fmtDuration(d))
	}
	if d%time.Second != 0 {
		return fmt.Errorf("must be whole seconds, as MQTT counts it, got %s", fmtDuration(d))
	}
	if d > MaxSessionExpiry {
		return fmt.Errorf("must be at most %s, as MQTT counts it in 32 bits (its largest value means never), got %s", fmtDuration(MaxSessionExpiry), fmtDuration(d))
	}
	return nil
}

// attempts checks the absolute bounds of max_attempts; checkAttempts
// checks MaxAttempts, which allow_more_attempts lifts.
func attempts(n int) error {
	if n < 1 {
		return fmt.Errorf("must be from 1 to %d, got %d; the radio layer already retries", MaxAttempts, n)
	}
	if n > MaxAllowedAttempts {
		return fmt.Errorf("must be at most %d even with allow_more_attempts, got %d", MaxAllowedAttempts, n)
	}
	return nil
}

func atLeast(low int) func(int) error {
	return func(n int) error {
		if n < low {
			return fmt.Errorf("must be at least %d, got %d", low, n)
		}
		return nil
	}
}

func between(low, high int) func(int) error {
	return func(n int) error {
		if n < low || n > high {
			return fmt.Errorf("must be from %d to %d, got %d", low, high, n)
		}
		return nil
	}
}

func positiveNumber(f float64) error {
	if f <= 0 {
		return fmt.Errorf("must be more than 0, got %g", f)
	}
	return nil
}

func ratio(f float64) error {
	if f <= 0 || f > 1 {
		return fmt.Errorf("must be more than 0 and at most 1, got %g", f)
	}
	return nil
}

func atLeastOne(f float64) error {
	if f < 1 {
		return fmt.Errorf("must be at least 1, got %g", f)
	}
	return nil
}

func knownProtocol(s string) error {
	if _, ok := protocols[s]; !ok {
		return fmt.Errorf("unknown protocol %q (known: %s)", s, strings.Join(protocolNames, ", "))
	}
	return nil
}

var serviceName = regexp.MustCompile(`^[a-z0-9_-]+$`)

func classNames() string {
	names := make([]string, len(devices.Classes))
	for i, c := range devices.Classes {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// topicRoot checks a topic that Hearth or a bridge puts its topics under:
// one or more levels, as topicLevels checks them, not starting with '$',
// which brokers keep for their own topics ($SYS).
func topicRoot(s string) error {
	if strings.HasPrefix(s, "$") {
		return fmt.Errorf("%q starts with '$', which brokers keep for their own topics", s)
	}
	return topicLevels(s)
}

// topicLevel checks one MQTT topic level: topicLevels without '/'.
func topicLevel(s string) error {
	if strings.Contains(s, "/") {
		return fmt.Errorf("%q contains '/'; it must be one topic level", s)
	}
	return topicLevels(s)
}

// topicLevels checks a part of an MQTT topic: a topic name by MQTT's
// rules (topic.ValidName: no wildcards '+' and '#', no NUL), of one or
// more non-empty levels separated by '/', without control characters.
func topicLevels(s string) error {
	if s == "" {
		return errEmpty
	}
	var e *topic.Error
	if errors.As(topic.ValidName(s), &e) {
		// A topic name's rules (topic.ValidName), such as no wildcards.
		return fmt.Errorf("%q %s", s, e.Reason)
	}
	if slices.Contains(strings.Split(s, "/"), "") {
		return fmt.Errorf("%q has an empty topic level; separate levels with one '/' and put none at either end", s)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return fmt.Errorf("%q contains a control character", s)
	}
	return nil
}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// listenAddress checks a listen address: host:port, where host is empty
// (every interface), an IP address or a host name, and port is 0–65535
// (0: any free port).
func listenAddress(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port such as 127.0.0.1:8080, got %q", s)
	}
	if err := checkPort(port, 0); err != nil {
		return err
	}
	if host == "" || hostName.MatchString(host) {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

// optionalListenAddress is listenAddress or "" (no listener).
func optionalListenAddress(s string) error {
	if s == "" {
		return nil
	}
	return listenAddress(s)
}

func checkPort(port string, low int) error {
	n, err := strconv.Atoi(port)
	if strings.Trim(port, "0123456789") != "" || err != nil || n < low || n > 65535 {
		return fmt.Errorf("port %q is not a number from %d to 65535", port, low)
	}
	return nil
}

// brokerSchemes are the URL schemes of an external broker that Hearth's
// MQTT connection dials, with their usual ports. MQTT over WebSocket (ws://,
// wss://) is not supported yet.
var brokerSchemes = []brokerScheme{
	{"tcp", 1883}, {"ssl", 8883}, {"mqtt", 1883}, {"mqtts", 8883},
}

type brokerScheme struct {
	scheme string
	port   int // 0: the port may be left out
}

// brokerURL checks an external broker's URL. It never repeats the URL,
// which may hold a password.
func brokerURL(s string) error {
	if s == "" {
		return nil
	}
	if !strings.Contains(s, "://") {
		return errors.New("want a URL such as tcp://broker.local:1883; this one has no scheme")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a valid URL: %v", err)
	}
	if u.Scheme == "ws" || u.Scheme == "wss" {
		return errors.New("MQTT over WebSocket (ws://, wss://) is not supported yet; use tcp://, mqtt://, ssl:// or mqtts://")
	}
	i := slices.IndexFunc(brokerSchemes, func(b brokerScheme) bool { return b.scheme == u.Scheme })
	if i < 0 {
		known := make([]string, len(brokerSchemes))
		for i, b := range brokerSchemes {
			known[i] = b.scheme
		}
		return fmt.Errorf("unknown scheme %q (known: %s)", u.Scheme, strings.Join(known, ", "))
	}
	defaultPort := brokerSchemes[i].port
	switch {
	case u.User != nil:
		return errors.New("put credentials in mqtt.username and mqtt.password, not in the URL")
	case u.Hostname() == "":
		return fmt.Errorf("no host; want %s://host:port", u.Scheme)
	case u.Port() == "" && defaultPort != 0:
		return fmt.Errorf("no port; want %s://%s:%d or another port", u.Scheme, u.Host, defaultPort)
	case u.Port() != "":
		if err := checkPort(u.Port(), 1); err != nil {
			return err
		}
	}
	if defaultPort != 0 && (u.Path != "" || u.RawQuery != "") {
		return fmt.Errorf("a %s:// URL takes no path", u.Scheme)
	}
	return nil
}

// webhookURL checks a webhook service's URL: absolute, http or https, with
// a host. It never repeats the URL, which may hold a token.
func webhookURL(s string) error {
	if s == "" {
		return errEmpty
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a valid URL: %v", err)
	}
	switch {
	case u.Scheme == "":
		return errors.New("want an http:// or https:// URL such as https://ntfy.sh/hearth; this one has no scheme")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want an http:// or https:// URL, not %s://", u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("no host; want %s://host/path", u.Scheme)
	}
	return nil
}

var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// httpHeader checks an HTTP header field (RFC 9110 §5.1, §5.5): the name a
// token, the value without control characters other than tab. It never
// repeats the value, which may be a secret.
func httpHeader(name, value string) error {
	if !headerName.MatchString(name) {
		return fmt.Errorf("%q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
	}
	for _, r := range value {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return fmt.Errorf("the value holds control character %U, which an HTTP header cannot carry", r)
		}
	}
	return nil
}

// fmtDuration formats d as time.Duration does, without zero minutes and
// seconds after hours: 720h, not 720h0m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
