package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned is a server certificate for 127.0.0.1 and the pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// Attack: a connection to the TLS listener that never sends its
// ClientHello. The handshake happens within the CONNECT deadline, so it is
// closed then and counted as a CONNECT timeout, as on the TCP listener;
// a client that completes the handshake is served.
func TestTLSListenerClosesASilentHandshakeAtTheDeadline(t *testing.T) {
	cert, pool := selfSigned(t)
	const timeout = 200 * time.Millisecond
	b := startBroker(t, Options{Listen: "127.0.0.1:0", TLSListen: "127.0.0.1:0", ConnectTimeout: timeout,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if b.TLSAddr() == "" || b.TLSAddr() == b.Addr() {
		t.Fatalf("TLSAddr() = %q (Addr %q); want a listener of its own", b.TLSAddr(), b.Addr())
	}
	silent, err := net.Dial("tcp", b.TLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitClosed(t, silent, "the connection that never sent a ClientHello")
	if got := b.Stats().ConnectTimeouts; got != 1 {
		t.Errorf("Stats().ConnectTimeouts = %d; want 1", got)
	}

	conn, err := tls.Dial("tcp", b.TLSAddr(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS handshake with the broker: %v", err)
	}
	defer conn.Close()
	if _, err := tls.Dial("tcp", b.TLSAddr(), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Errorf("a TLS 1.1 handshake succeeded; want TLS 1.2 at least")
	}
}

func TestTLSListenWithoutConfigIsRefused(t *testing.T) {
	if b, err := Start(Options{TLSListen: "127.0.0.1:0"}); err == nil {
		b.Close()
		t.Fatal("Start with TLSListen and no TLSConfig succeeded; want an error")
	}
}
