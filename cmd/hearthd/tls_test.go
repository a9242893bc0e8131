package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// testCA is a throwaway certificate authority of one test, in a temp
// dir: ca.pem is its certificate, for clients to trust.
type testCA struct {
	t      *testing.T
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string
	serial int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Hearth test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key, serial: 1}
	ca.caFile = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.caFile, "CERTIFICATE", der)
	return ca
}

// issue writes a server certificate for 127.0.0.1 signed by ca, with
// the common name cn, to name.pem and name-key.pem in ca's dir, and
// returns their paths.
func (ca *testCA) issue(name, cn string) (certFile, keyFile string) {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withMQTTS adds an mqtts listener on a free loopback port with the
// given certificate to a harness config.
func withMQTTS(config, certFile, keyFile string) string {
	return strings.Replace(config, "mqtt:\n  listen: 127.0.0.1:0\n",
		"mqtt:\n  listen: 127.0.0.1:0\n  mqtts:\n    listen: 127.0.0.1:0\n    cert_file: "+certFile+"\n    key_file: "+keyFile+"\n", 1)
}

// A principal's mosquitto_pub over mqtts, trusting the CA that signed
// hearthd's certificate, is accepted and its command runs; one that
// trusts only the system's roots fails the handshake and commands
// nothing.
func TestMQTTSAcceptsAClientThatTrustsTheCA(t *testing.T) {
	mosquittoTools(t)
	ca := newTestCA(t)
	certFile, keyFile := ca.issue("server", "hearth")
	h := newHarness(t, harnessOptions{config: withMQTTS(mqttPrincipalsConfig, certFile, keyFile), simLogin: bridgeLogin, automationLogin: tabletLogin})
	host, port, err := net.SplitHostPort(h.d.broker.TLSAddr())
	if err != nil {
		t.Fatalf("mqtts address %q: %v", h.d.broker.TLSAddr(), err)
	}
	pub := func(trust []string, opID string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), eventWait)
		defer cancel()
		args := append(trust, "-h", host, "-p", port, "-u", phoneLogin.username, "-P", phoneLogin.password,
			"-q", "1", "-t", "hearth/front_door/set", "-m", `{"state":"LOCK","op_id":"`+opID+`"}`)
		return exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput()
	}
	if out, err := pub([]string{"--capath", "/etc/ssl/certs"}, "untrusted"); err == nil {
		t.Errorf("mosquitto_pub trusting only the system's roots: accepted (%s); want a failed handshake", out)
	}
	if out, err := pub([]string{"--cafile", ca.caFile}, "over-mqtts"); err != nil {
		t.Fatalf("mosquitto_pub --cafile: %v: %s", err, out)
	}
	if r := h.final("over-mqtts"); r.Status != devices.Succeeded {
		t.Fatalf("the command over mqtts ended %s (%s: %s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	if _, found, err := h.d.store.Lookup("untrusted"); err != nil || found {
		t.Errorf("the command of the client that refused the certificate: stored %v (%v); want never received", found, err)
	}
}

// withHTTPS gives a harness config's HTTP API the certificate.
func withHTTPS(config, certFile, keyFile string) string {
	return strings.Replace(config, "http:\n  listen: 127.0.0.1:0\n",
		"http:\n  listen: 127.0.0.1:0\n  tls:\n    cert_file: "+certFile+"\n    key_file: "+keyFile+"\n", 1)
}

// httpsClient trusts only ca.
func httpsClient(t *testing.T, ca *testCA) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &http.Client{Timeout: eventWait, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// With http.tls the API is HTTPS: a client that trusts the CA reads
// /readyz and the API, and plain HTTP gets no answer of the API.
func TestHTTPSServesTheAPIWithTheConfiguredCertificate(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issue("server", "hearth")
	h := newHarness(t, harnessOptions{config: withHTTPS(testConfig, certFile, keyFile)})
	client := httpsClient(t, ca)
	for _, path := range []string{"/readyz", "/api/v1/breakers"} {
		resp, err := client.Get("https://" + h.d.httpAddr() + path)
		if err != nil {
			t.Fatalf("GET https %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Errorf("GET https %s: %d, TLS %v; want 200 over TLS", path, resp.StatusCode, resp.TLS != nil)
		}
	}
	if resp, err := (&http.Client{Timeout: eventWait}).Get("http://" + h.d.httpAddr() + "/api/v1/breakers"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET plain http: 200; want the API only over HTTPS")
		}
	}
}

// servedName is the common name of the certificate that addr presents to
// a new TLS connection trusting ca.
func servedName(t *testing.T, ca *testCA, addr string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: eventWait}, "tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// On a reload (SIGHUP) hearthd reads the certificates of mqtt.mqtts and
// http.tls again: new connections to both see the new certificate. A
// file that no longer loads keeps the one in use.
func TestReloadSwapsTheServedCertificates(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issue("server", "before")
	config := withHTTPS(withMQTTS(mqttPrincipalsConfig, certFile, keyFile), certFile, keyFile)
	h := newHarness(t, harnessOptions{config: config, simLogin: bridgeLogin, automationLogin: tabletLogin})
	addrs := map[string]string{"mqtts": h.d.broker.TLSAddr(), "https": h.d.httpAddr()}
	for what, addr := range addrs {
		if got := servedName(t, ca, addr); got != "before" {
			t.Fatalf("%s before the reload: certificate %q; want \"before\"", what, got)
		}
	}
	// A renewal writes new files in place (as certbot's deploy hook or
	// cert-manager would), then signals hearthd.
	newCert, newKey := ca.issue("renewed", "after")
	for from, to := range map[string]string{newCert: certFile, newKey: keyFile} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	h.d.reload(h.cfg)
	for what, addr := range addrs {
		if got := servedName(t, ca, addr); got != "after" {
			t.Errorf("%s after the reload: certificate %q; want \"after\"", what, got)
		}
	}
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.d.reload(h.cfg)
	for what, addr := range addrs {
		if got := servedName(t, ca, addr); got != "after" {
			t.Errorf("%s after a reload of a broken file: certificate %q; want the running \"after\"", what, got)
		}
	}
}

// A reload whose files do not load logs an error naming the key and the
// files, and keeps the certificate in use.
func TestCertificateReloadLogsTheFileThatDoesNotLoad(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issue("server", "running")
	s, err := loadServerCert("http.tls", config.ServerCert{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	running := s.cert.Load()
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s.reload(slog.New(slog.NewTextHandler(&logs, nil)))
	if s.cert.Load() != running {
		t.Errorf("the certificate changed after a failed reload; want the running one kept")
	}
	for _, want := range []string{"level=ERROR", "key=http.tls", "cert_file=" + certFile, "key_file=" + keyFile, "no such file"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	if _, err := loadServerCert("http.tls", config.ServerCert{CertFile: certFile, KeyFile: keyFile}); err == nil || !strings.Contains(err.Error(), "http.tls") || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("loadServerCert of a missing key: %v; want an error naming http.tls and %s", err, keyFile)
	}
}

// A certificate of http.tls that does not load (a typo in its path) is a
// start error, and start returns it: it does not wait for an HTTP server
// it never started, holding the data directory and the ports.
func TestStartWithAnHTTPSCertificateThatDoesNotLoadReturnsItsError(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(withHTTPS(testConfig, "/nonexistent/cert.pem", "/nonexistent/key.pem")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	openWithoutPrincipals(cfg)
	done := make(chan error, 1)
	go func() {
		d, err := start(cfg, deps{logger: testLogger(t)})
		if err == nil {
			d.stop()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "http.tls") || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
			t.Fatalf("start with a missing http.tls certificate: %v; want an error naming http.tls and the file", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("start with a missing http.tls certificate has not returned after 20 s")
	}
}
