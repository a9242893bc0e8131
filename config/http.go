package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hearthd/hearth/retry"
)

// ProtocolHTTP is the protocol of a service of plain HTTP devices: a
// garage door controller, a heat pump or a cloud API behind a REST
// endpoint (protocols/httpdev; docs/HTTP.md). Hearth sends each command
// as one request, <method> <url>/<address> with the target as JSON, and
// reads the device's state with GET <url>/<address>. Its url is https://
// unless its host is loopback or allow_insecure says otherwise.
const ProtocolHTTP = "http"

// HTTPMethods are the methods an http service may send commands with.
var HTTPMethods = []string{"PUT", "POST", "PATCH"}

// A request per attempt, each bounded by timeout (5s); no radio layer
// retries for Hearth: 3 attempts (devices.Transport.DefaultAttempts), the
// rest as for the bridges, so that 408, 425, 429 and 5xx (but 501 and
// 505) are retried, honouring Retry-After, and other 4xx are not.
func init() {
	protocols[ProtocolHTTP] = Service{
		Timeout:     5 * time.Second,
		ReadTimeout: 5 * time.Second,
		Method:      "PUT",
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    3,
				AttemptTimeout: 5 * time.Second,
				Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 30 * time.Second},
				MaxRetryAfter:  retry.DefaultMaxRetryAfter,
			},
			Budget: Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
		},
		Breaker: defaultBreaker,
	}
	protocolNames = append(protocolNames, ProtocolHTTP)
	slices.Sort(protocolNames)
}

// httpMethod checks an http service's method.
func httpMethod(s string) error {
	if !slices.Contains(HTTPMethods, strings.ToUpper(s)) {
		return fmt.Errorf("%q: want PUT, POST or PATCH", s)
	}
	return nil
}

// checkHTTPService reports what an http service (key is services.<name>)
// lacks or has wrong: a missing url, one with a query or fragment (a
// device's address is a path under it), plain http:// to a host that is
// not loopback without allow_insecure (the headers, a token among them,
// would cross the network in clear), and the keys it does not take. It
// reports method and allow_insecure on any other protocol.
func (w *walker) checkHTTPService(key string, s Service) {
	if s.Protocol != ProtocolHTTP {
		for _, name := range []string{"method", "allow_insecure"} {
			if k := join(key, name); w.lines[k] != 0 && !w.reported[k] && !w.reported[join(key, "protocol")] {
				w.reportf(w.lines[k], k, "only for protocol http, not %s", s.Protocol)
			}
		}
		return
	}
	k := join(key, "url")
	switch {
	case w.reported[k]:
	case s.URL == "":
		w.reportf(w.lines[key], k, "missing; an http service needs the base URL its devices' addresses are paths under, such as https://garage.local/api")
	default:
		u, _ := url.Parse(s.URL) // checked by webhookURL
		switch {
		case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s.URL, "?"):
			w.reportf(w.lines[k], k, "an http service's url takes no query or fragment: each device's address is a path under it")
		case u.Scheme == "http" && !s.AllowInsecure && !loopbackHost(u.Hostname()):
			w.reportf(w.lines[k], k, "plain http:// to %s, which is not loopback: use https://, or set allow_insecure: true to send commands and headers in clear on this network", u.Hostname())
		}
	}
	if k := join(key, "base_topic"); w.lines[k] != 0 {
		w.reportf(w.lines[k], k, "an http service takes no base_topic: Hearth reaches it over HTTP, at its url")
	}
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpAddress checks a device's address on an http service as
// protocols/httpdev.ParseAddress does (config may not import it; a test
// of cmd/hearthd keeps the two in step): a relative path of non-empty
// segments, no '.' or '..', without '?', '#', '%', '\', spaces or control
// characters.
func httpAddress(addr string) error {
	if strings.HasPrefix(addr, "/") || strings.HasSuffix(addr, "/") {
		return fmt.Errorf("%q: write the path without a leading or trailing '/' (doors/1)", addr)
	}
	for _, s := range strings.Split(addr, "/") {
		switch {
		case s == "":
			return fmt.Errorf("%q: an empty path segment ('//')", addr)
		case s == "." || s == "..":
			return fmt.Errorf("%q: no '.' or '..' segments: the address stays under the service's url", addr)
		}
		for _, r := range s {
			if r <= ' ' || r == 0x7f || strings.ContainsRune("?#%\\", r) {
				return fmt.Errorf("%q: %q is not allowed in an http address (no '?', '#', '%%', '\\', spaces or control characters)", addr, r)
			}
		}
	}
	return nil
}
