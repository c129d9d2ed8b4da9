// Package testpki makes a throwaway certificate authority and the
// certificates tests need (etcd servers, peers, the agent's client
// certificate), with crypto/x509 and ECDSA P-256. Only tests use it.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA signs certificates for one test.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// rsaBits: the CA and what it issues have RSA keys of this size, as
	// kubeadm's (0: ECDSA P-256).
	rsaBits int
	// CertPEM is the CA certificate, what trustedCAFile holds; KeyPEM its
	// private key (tls.ca.keyFile).
	CertPEM, KeyPEM []byte
}

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM, KeyPEM []byte
}

var serial atomic.Int64

// NewCA makes a self-signed CA valid for ten years, as kubeadm's.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, 0)
}

// NewRSACA is NewCA with RSA 2048 keys for the CA and all it issues, as
// kubeadm makes them.
func NewRSACA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, 2048)
}

func newCA(t testing.TB, name string, rsaBits int) *CA {
	t.Helper()
	key := newKey(t, rsaBits)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal CA key: %v", err)
	}
	return &CA{cert: cert, key: key, rsaBits: rsaBits, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// Issue signs a certificate for cn, valid for a year (kubeadm's default)
// for servers and clients (etcd members use their peer certificate both
// ways), with ips as its IP SANs and cn as its DNS SAN.
func (ca *CA) Issue(t testing.TB, cn string, ips ...net.IP) Pair {
	t.Helper()
	return ca.IssueValid(t, cn, time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour), ips...)
}

// IssueValid is Issue with the validity notBefore to notAfter: an expired
// certificate, or one that expires soon.
func (ca *CA) IssueValid(t testing.TB, cn string, notBefore, notAfter time.Time, ips ...net.IP) Pair {
	t.Helper()
	return ca.issue(t, cn, notBefore, notAfter, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, ips)
}

// IssueUsages is Issue with the extended key usages ekus (none: the
// certificate has no such extension, which allows every usage): a peer
// certificate for serverAuth only, an agent certificate without
// clientAuth.
func (ca *CA) IssueUsages(t testing.TB, cn string, ekus []x509.ExtKeyUsage, ips ...net.IP) Pair {
	t.Helper()
	return ca.issue(t, cn, time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour), ekus, ips)
}

// IssueFor is Issue valid from now for life, with the extended key usages
// ekus: a short-lived certificate for the renewal tests.
func (ca *CA) IssueFor(t testing.TB, cn string, life time.Duration, ekus []x509.ExtKeyUsage, ips ...net.IP) Pair {
	t.Helper()
	now := time.Now()
	return ca.issue(t, cn, now, now.Add(life), ekus, ips)
}

func (ca *CA) issue(t testing.TB, cn string, notBefore, notAfter time.Time, ekus []x509.ExtKeyUsage, ips []net.IP) Pair {
	t.Helper()
	key := newKey(t, ca.rsaBits)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  ekus,
		DNSNames:     []string{cn},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("issue %s: %v", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key of %s: %v", cn, err)
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// Write puts the pair in dir as <name>.crt and <name>.key and returns
// their paths.
func (p Pair) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, p.CertPEM)
	WriteFile(t, keyFile, p.KeyPEM)
	return certFile, keyFile
}

// WriteFile writes data to path (0600), creating its dir.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB, rsaBits int) crypto.Signer {
	t.Helper()
	if rsaBits > 0 {
		key, err := rsa.GenerateKey(rand.Reader, rsaBits)
		if err != nil {
			t.Fatalf("generate key: %v", err)
		}
		return key
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func nextSerial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serial.Add(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
