package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestRecoveryTLSReloadsTheCA: the cross-host recovery listener reads the
// peer CA file at every handshake, so that during a CA rotation a caller
// with a certificate of the new CA is taken without an agent restart.
func TestRecoveryTLSReloadsTheCA(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := testpki.NewCA(t, "old"), testpki.NewCA(t, "new")
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, oldCA.CertPEM)
	cert, key := oldCA.Issue(t, "node1", net.ParseIP("127.0.0.1")).Write(t, dir, "peer")
	cfg, err := RecoveryTLS(spec.TLSServer{CertFile: cert, KeyFile: key, TrustedCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	caller := newCA.Issue(t, "node2", net.ParseIP("127.0.0.1"))
	pair, err := tls.X509KeyPair(caller.CertPEM, caller.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(oldCA.CertPEM)
	dial := func() error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}})
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3: the server's verdict on the client certificate comes
		// with the first read.
		_, err = c.Read(make([]byte, 1))
		if err != nil && err.Error() == "EOF" {
			return nil
		}
		return err
	}
	if err := dial(); err == nil {
		t.Fatal("a caller of a CA the file does not hold was taken")
	}
	b, _ := os.ReadFile(caFile)
	testpki.WriteFile(t, caFile, append(b, newCA.CertPEM...))
	if err := dial(); err != nil {
		t.Fatalf("a caller of the CA now in the file: %v", err)
	}
}
