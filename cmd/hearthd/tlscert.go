package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/hearthd/hearth/config"
)

// serverCert is a server certificate read from the files a config key
// names (mqtt.mqtts, http.tls), which a SIGHUP reload reads again and
// swaps in whole: connections accepted after the reload see the new
// certificate, established ones keep theirs. The files stay those named
// at start; a new file name waits for a restart (reload warns of it).
type serverCert struct {
	key   string // the config key, for logs: "mqtt.mqtts"
	files config.ServerCert
	cert  atomic.Pointer[tls.Certificate]
}

// loadServerCert reads files, the PEM certificate (chain, leaf first)
// and its PEM key named at key; the error names the key and the files.
func loadServerCert(key string, files config.ServerCert) (*serverCert, error) {
	s := &serverCert{key: key, files: files}
	if err := s.read(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *serverCert) read() error {
	c, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return fmt.Errorf("%s: certificate %s with key %s: %w", s.key, s.files.CertFile, s.files.KeyFile, err)
	}
	s.cert.Store(&c)
	return nil
}

// reload reads the files again; when they do not make a certificate and
// its key (missing, unreadable, not matching) it logs an error naming
// them and keeps the certificate it has.
func (s *serverCert) reload(log *slog.Logger) {
	if err := s.read(); err != nil {
		log.Error("certificate not reloaded; the running one stays", "key", s.key, "cert_file", s.files.CertFile, "key_file", s.files.KeyFile, "err", err)
		return
	}
	log.Info("certificate reloaded", "key", s.key, "cert_file", s.files.CertFile)
}

// tlsConfig is a server configuration presenting s's current
// certificate, TLS 1.2 at least.
func (s *serverCert) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
}
