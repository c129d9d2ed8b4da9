package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestAgentLogsInAfterAuthEnable: agents with a credentials file run
// while etcd's auth is off, then an operator runs etcdctl auth enable.
// The agents' clients connected before and hold no token, and etcd
// judges their calls as their certificate's CN, which is no etcd user.
// They must log in: node3's agent, stopped, revokes the lease of its
// agent record, so the record is gone by the time the agent has exited
// (refused, it would stay until the lease's TTL runs out).
func TestAgentLogsInAfterAuthEnable(t *testing.T) {
	t.Parallel()
	const password = "pw-after-enable"
	credentials := filepath.Join(t.TempDir(), "credentials")
	testpki.WriteFile(t, credentials, []byte("root:"+password+"\n"))
	c, _, _ := startTLSCluster(t, "auth:\n  credentialsFile: "+credentials+"\n")
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	const record = "/etcdkeeper/itest/agents/node3"
	if resp, err := cli.Get(ctx, record); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("node3's agent record before the stop: %v, %v", resp, err)
	}
	if err := c.Stop("node3"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, record)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("node3's agent record outlived its agent: the lease revoke at shutdown was refused (lease %x)", resp.Kvs[0].Lease)
	}
	c.Start("node3")
	c.WaitVoters(converge, c.AllNames()...)
}
