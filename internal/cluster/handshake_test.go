package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestHandshakeRefused: a real etcd whose client port demands client
// certificates refuses an agent without one, or with one not meant for
// clients; an agent refuses an etcd whose certificate is not meant for
// servers. HandshakeRefused says why, from the status call's error.
func TestHandshakeRefused(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, ca.CertPEM)
	lo := net.ParseIP("127.0.0.1")
	serverCrt, serverKey := ca.Issue(t, "server", lo).Write(t, dir, "server")
	nodes := testetcd.StartCluster(t, []testetcd.Node{{Name: "n1", Host: "127.0.0.1"}}, &testetcd.ClientTLS{CertFile: serverCrt, KeyFile: serverKey, TrustedCAFile: caFile})
	agentCrt, agentKey := ca.Issue(t, "agent").Write(t, dir, "agent")
	serverOnlyCrt, serverOnlyKey := ca.IssueUsages(t, "agent", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}).Write(t, dir, "server-only")

	status := func(c spec.TLSClient, endpoint string) error {
		t.Helper()
		cfg, err := TLSConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := Dial([]string{endpoint}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		_, err = cli.Status(context.Background(), endpoint)
		return err
	}
	ep := nodes[0].ClientURL
	if err := status(spec.TLSClient{CertFile: agentCrt, KeyFile: agentKey, TrustedCAFile: caFile}, ep); err != nil {
		t.Fatalf("status with a good certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		c    spec.TLSClient
		want string
	}{
		{"no client certificate", spec.TLSClient{TrustedCAFile: caFile}, "tls: certificate required"},
		{"client certificate for serverAuth only", spec.TLSClient{CertFile: serverOnlyCrt, KeyFile: serverOnlyKey, TrustedCAFile: caFile}, "tls: bad certificate"},
		{"etcd's certificate of another CA", spec.TLSClient{CertFile: agentCrt, KeyFile: agentKey, TrustedCAFile: otherCA(t, dir)}, "x509: certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := status(tc.c, ep)
			if err == nil {
				t.Fatal("status succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("status error %q does not say %q", err, tc.want)
			}
			if got := HandshakeRefused(err); !strings.Contains(got, tc.want) {
				t.Errorf("HandshakeRefused = %q, want it to say %q (the error: %v)", got, tc.want, err)
			}
		})
	}
	t.Run("not a handshake error", func(t *testing.T) {
		for _, err := range []error{errors.New("connection refused"), fmt.Errorf("status: %w", context.DeadlineExceeded)} {
			if got := HandshakeRefused(err); got != "" {
				t.Errorf("HandshakeRefused(%v) = %q, want none", err, got)
			}
		}
	})
}

func otherCA(t *testing.T, dir string) string {
	f := filepath.Join(dir, "other-ca.crt")
	testpki.WriteFile(t, f, testpki.NewCA(t, "other").CertPEM)
	return f
}
