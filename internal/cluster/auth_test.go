package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestAuthEnabledAfterDial: an agent's client connects, with credentials
// and a client certificate whose CN ("agent") is an etcd user without a
// role, while auth is off; then auth is enabled (etcdctl auth enable).
// The client holds no token, so etcd judges its calls as the
// certificate's CN: each must log in and succeed anyway, the lease
// revokes of its lock and its agent record (at shutdown) included.
func TestAuthEnabledAfterDial(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, ca.CertPEM)
	serverCrt, serverKey := ca.Issue(t, "server", net.ParseIP("127.0.0.1")).Write(t, dir, "server")
	nodes := testetcd.StartCluster(t, []testetcd.Node{{Name: "n1", Host: "127.0.0.1"}}, &testetcd.ClientTLS{CertFile: serverCrt, KeyFile: serverKey, TrustedCAFile: caFile})
	agentCrt, agentKey := ca.Issue(t, "agent").Write(t, dir, "agent")
	tlsCfg, err := TLSConfig(spec.TLSClient{CertFile: agentCrt, KeyFile: agentKey, TrustedCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	ep := nodes[0].ClientURL
	c, err := Dial([]string{ep}, tlsCfg, WithCredentials("root", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	p, err := c.NewPresence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, "t", model.AgentRecord{Name: "n1", Phase: "running"}); err != nil {
		t.Fatal(err)
	}
	lock, err := c.TryLock(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}

	enableAuth(t, ep, tlsCfg)

	if _, err := c.Agents(ctx, "t"); err != nil {
		t.Errorf("read agent records after auth enable: %v", err)
	}
	if _, err := c.Alarms(ctx); err != nil {
		t.Errorf("alarm list after auth enable: %v", err)
	}
	if err := p.Publish(ctx, "t", model.AgentRecord{Name: "n1", Phase: "waiting"}); err != nil {
		t.Errorf("publish after auth enable: %v", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Errorf("unlock (lease revoke) after auth enable: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("presence close (lease revoke) after auth enable: %v", err)
	}
	if recs, err := c.Agents(ctx, "t"); err != nil || len(recs) != 0 {
		t.Errorf("agent records after the revoke: %v, %v; want none", recs, err)
	}
}

// enableAuth makes root (role root) with password pw, a user "agent" (the
// agent certificate's CN) without a role, and enables auth.
func enableAuth(t *testing.T, ep string, tlsCfg *tls.Config) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "agent", "agent-pw"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
}
