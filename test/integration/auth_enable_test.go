package integration

import (
	"context"
	"testing"
	"time"
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
	c, _, _ := startAuthCluster(t, password)
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
