package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/internal/testport"
)

func TestTLSConfigUnset(t *testing.T) {
	cfg, err := TLSConfig(spec.TLSClient{})
	if cfg != nil || err != nil {
		t.Fatalf("TLSConfig(unset) = %v, %v; want nil, nil", cfg, err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	cert, _ := ca.Issue(t, "agent").Write(t, dir, "agent")
	_, otherKey := ca.Issue(t, "other").Write(t, dir, "other")
	garbage := filepath.Join(dir, "garbage")
	testpki.WriteFile(t, garbage, []byte("nothing\n"))
	tests := []struct {
		name string
		c    spec.TLSClient
		want string
	}{
		{"key of another certificate", spec.TLSClient{CertFile: cert, KeyFile: otherKey}, "private key does not match public key"},
		{"missing key", spec.TLSClient{CertFile: cert, KeyFile: filepath.Join(dir, "nope.key")}, "no such file"},
		{"CA not PEM", spec.TLSClient{TrustedCAFile: garbage}, "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := TLSConfig(tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("TLSConfig = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestTLSConfigHandshake: the config trusts the CA, verifies the server's
// IP address and presents the client certificate a server that requires
// one accepts.
func TestTLSConfigHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, ca.CertPEM)
	server := ca.Issue(t, "server", net.ParseIP("127.0.0.1"))
	serverPair, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	certFile, keyFile := ca.Issue(t, "etcdkeeper").Write(t, dir, "agent")
	cfg, err := TLSConfig(spec.TLSClient{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.Clone()}, Timeout: 5 * time.Second}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return string(b[:n]), nil
	}
	if cn, err := get(); err != nil || cn != "etcdkeeper" {
		t.Fatalf("GET = %q, %v; want the client certificate etcdkeeper", cn, err)
	}
	// A renewed certificate is used at the next handshake.
	ca.Issue(t, "renewed").Write(t, dir, "agent")
	if cn, err := get(); err != nil || cn != "renewed" {
		t.Fatalf("GET after renewal = %q, %v; want renewed", cn, err)
	}
	// A half-written renewal keeps the last good pair.
	testpki.WriteFile(t, keyFile, []byte("partial"))
	if cn, err := get(); err != nil || cn != "renewed" {
		t.Fatalf("GET with a broken key file = %q, %v; want the last good pair", cn, err)
	}
}

func TestReadCredentials(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	testpki.WriteFile(t, good, []byte("root:pa:ss\n"))
	if u, p, err := ReadCredentials(good); err != nil || u != "root" || p != "pa:ss" {
		t.Fatalf("ReadCredentials = %q, %q, %v", u, p, err)
	}
	for _, content := range []string{"root:\n", ":secretpass\n", "secretpass\n"} {
		bad := filepath.Join(dir, "bad")
		testpki.WriteFile(t, bad, []byte(content))
		_, _, err := ReadCredentials(bad)
		if err == nil || strings.Contains(err.Error(), "secretpass") {
			t.Errorf("ReadCredentials(%q) = %v; want an error that does not show the password", content, err)
		}
	}
	if _, _, err := ReadCredentials(filepath.Join(dir, "nope")); err == nil {
		t.Error("ReadCredentials(missing) succeeded")
	}
}

// TestDialWithCredentialsDown: with credentials, Dial must not need a live
// cluster (clientv3 would log in at once and fail): the agent dials before
// any member runs. The calls fail instead, quickly.
func TestDialWithCredentialsDown(t *testing.T) {
	// A port no other test (of this process or another) is given:
	// nothing answers there.
	port, err := testport.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ep := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("root:pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Auth: spec.Auth{CredentialsFile: creds}}
	start := time.Now()
	c, err := DialSpec(s, spec.Member{}, []string{ep})
	if err != nil {
		t.Fatalf("DialSpec = %v, want no error while the cluster is down", err)
	}
	defer c.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("DialSpec took %s: it must not wait for the cluster", d)
	}
	if _, _, err := c.Members(context.Background()); err == nil {
		t.Fatal("Members succeeded with nothing listening")
	}
	if d := time.Since(start); d > 3*CallTimeout {
		t.Errorf("a failed call took %s", d)
	}
}
