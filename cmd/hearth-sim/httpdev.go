package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/simulator"
)

// playHTTPDevices starts one simulated HTTP server per http service of
// cfg whose url is plain http:// on a loopback host with a port, listening
// there and playing the service's devices at <url path>/<address>, with
// faults; its bearer token is the one the service's Authorization header
// sends. Other http services (https://, another host) are logged and left
// to their real devices. stop closes the servers.
func playHTTPDevices(cfg *config.Config, faults simulator.HTTPFaults, log *slog.Logger) (stop func(), err error) {
	var servers []*simulator.HTTPServer
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for _, s := range cfg.Services {
		if s.Protocol != config.ProtocolHTTP {
			continue
		}
		u, err := url.Parse(s.URL)
		if err != nil {
			stop()
			return nil, fmt.Errorf("service %s: url: %v", s.Name, err)
		}
		ip := net.ParseIP(u.Hostname())
		if u.Scheme != "http" || u.Port() == "" || !(strings.EqualFold(u.Hostname(), "localhost") || (ip != nil && ip.IsLoopback())) {
			log.Info("http service not simulated: hearth-sim plays plain http:// services on a loopback host and port only", "service", s.Name)
			continue
		}
		var devs []simulator.HTTPDevice
		for _, d := range cfg.Devices {
			if d.Service == s.Name {
				devs = append(devs, simulator.HTTPDevice{Path: strings.TrimRight(u.Path, "/") + "/" + d.Address, Class: string(d.Class)})
			}
		}
		token, _ := strings.CutPrefix(s.Headers["Authorization"], "Bearer ")
		srv, err := simulator.NewHTTPServer(simulator.HTTPOptions{Listen: u.Host, Devices: devs, Faults: faults, Token: token})
		if err != nil {
			stop()
			return nil, fmt.Errorf("service %s: %w", s.Name, err)
		}
		servers = append(servers, srv)
		log.Info("playing HTTP devices", "service", s.Name, "url", srv.URL, "devices", len(devs))
	}
	return stop, nil
}

// httpFlags registers the HTTP devices' own fault flags (-drop-first
// applies to them too: the first N commands closed without an answer).
func httpFlags(fs interface {
	IntVar(*int, string, int, string)
	StringVar(*string, string, string, string)
}, f *simulator.HTTPFaults) {
	fs.IntVar(&f.FailFirst, "http-fail-first", 0, "HTTP devices answer their first N commands with -http-fail-status")
	fs.IntVar(&f.FailStatus, "http-fail-status", 503, "the status of -http-fail-first answers (429, 503, 400, …)")
	fs.StringVar(&f.RetryAfter, "http-retry-after", "", "Retry-After sent with -http-fail-first answers: seconds or an HTTP-date")
}
