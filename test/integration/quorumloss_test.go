package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// loseQuorum is the recovery tests' one quorum loss: node2 and node3
// stop; node2's agent runs again (it can be fenced) but its etcd cannot
// start (its WAL is damaged); node3's host is off; node1's etcd runs
// without a leader. It returns once node2's agent says the quorum is lost.
func loseQuorum(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for _, name := range []string{"node2", "node3"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	c.CorruptWAL("node2")
	c.Start("node2")
	c.WaitPasses(converge, 2, "node2")
	testbed.Eventually(t, converge, "node2 reports that quorum is lost", func() string {
		if !c.LogContains("node2", "quorum lost: manual recovery needed") {
			return "not yet"
		}
		return ""
	})
}

// waitLeaderless waits until each named member's etcd answers without a
// leader.
func waitLeaderless(t *testing.T, c *testbed.Cluster, names ...string) {
	t.Helper()
	for _, n := range names {
		testbed.Eventually(t, converge, n+" without a leader", func() string {
			cli := c.Client(n)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			st, err := cli.Status(ctx, c.Member(n).ClientURL())
			if err != nil {
				return err.Error()
			}
			if st.Leader != 0 {
				return fmt.Sprintf("leader %x", st.Leader)
			}
			return ""
		})
	}
}
