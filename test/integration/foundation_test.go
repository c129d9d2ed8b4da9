package integration

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

const converge = 90 * time.Second

// TestBootstrapAndSupervise bootstraps three members from nothing, then
// checks supervision: a kill -9 of an etcd child, SIGTERM of an agent and
// a restart, and a kill -9 of an agent that must leave no orphan etcd.
func TestBootstrapAndSupervise(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client()
	testbed.Put(t, cli, "/k/before", "v1")

	t.Run("etcd killed -9 comes back with the same member ID and its data", func(t *testing.T) {
		pid := c.EtcdPID("node2")
		if !testbed.Alive(pid) {
			t.Fatalf("etcd of node2 (pid %d) is not running", pid)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, converge, "a new etcd for node2", func() string {
			if p := c.EtcdPID("node2"); p == pid || !testbed.Alive(p) {
				return fmt.Sprintf("etcd pid still %d", p)
			}
			return ""
		})
		after := c.WaitVoters(converge, c.AllNames()...)
		if after["node2"] != ids["node2"] {
			t.Fatalf("node2 member ID changed from %x to %x", ids["node2"], after["node2"])
		}
		testbed.Eventually(t, converge, "node2 serves the key written before", func() string {
			v, err := c.GetFrom("node2", "/k/before")
			if err != nil || v != "v1" {
				return fmt.Sprintf("got %q, %v", v, err)
			}
			return ""
		})
		if !c.LogContains("node2", `"msg":"etcd exited"`, "killed by signal killed") {
			t.Errorf("node2's agent did not log the etcd exit")
		}
	})

	t.Run("SIGTERM stops agent and etcd cleanly; restart keeps the member ID", func(t *testing.T) {
		pid := c.EtcdPID("node3")
		if err := c.Stop("node3"); err != nil {
			t.Fatalf("agent exit after SIGTERM: %v (want status 0)", err)
		}
		if testbed.Alive(pid) {
			t.Fatalf("etcd pid %d still running after its agent stopped", pid)
		}
		c.Start("node3")
		after := c.WaitVoters(converge, c.AllNames()...)
		if after["node3"] != ids["node3"] {
			t.Fatalf("node3 member ID changed from %x to %x", ids["node3"], after["node3"])
		}
	})

	t.Run("agent killed -9 leaves no orphan etcd; restart keeps the member ID", func(t *testing.T) {
		pid := c.EtcdPID("node1")
		c.Kill9("node1")
		testbed.Eventually(t, 30*time.Second, "etcd of the killed agent exits", func() string {
			if testbed.Alive(pid) {
				return fmt.Sprintf("etcd pid %d still running", pid)
			}
			return ""
		})
		c.Start("node1")
		after := c.WaitVoters(converge, c.AllNames()...)
		if after["node1"] != ids["node1"] {
			t.Fatalf("node1 member ID changed from %x to %x", ids["node1"], after["node1"])
		}
	})
}

// TestJoinAndLostDataDir: a 4th member joins a running cluster as a
// learner and is promoted; a member whose data dir is lost rejoins with a
// new ID, leaving no ghost and no learner.
func TestJoinAndLostDataDir(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	testbed.Put(t, c.Client(), "/k/a", "1")

	t.Run("a 4th member joins as learner and is promoted", func(t *testing.T) {
		c.AddMember()
		c.WriteSpec()
		c.Start("node4")
		ids4 := c.WaitVoters(converge, c.AllNames()...)
		for _, n := range []string{"node1", "node2", "node3"} {
			if ids4[n] != ids[n] {
				t.Fatalf("%s changed ID", n)
			}
		}
		logged(t, c, "node4's agent says it promoted node4 from learner", []string{"node4"}, "promoted to voter")
		testbed.Eventually(t, converge, "node4 has the data", func() string {
			if v, err := c.GetFrom("node4", "/k/a"); err != nil || v != "1" {
				return fmt.Sprintf("%q %v", v, err)
			}
			return ""
		})
		ids = ids4
	})

	t.Run("a lost data dir rejoins with a new ID and no ghost", func(t *testing.T) {
		if err := c.Stop("node2"); err != nil {
			t.Fatal(err)
		}
		// The disk was replaced: the test removes its own temp data.
		if err := os.RemoveAll(c.DataDir("node2")); err != nil {
			t.Fatal(err)
		}
		c.Start("node2")
		after := c.WaitVoters(converge, c.AllNames()...)
		if after["node2"] == ids["node2"] {
			t.Fatalf("node2 kept member ID %x with an empty data dir; want a new member (before %v, after %v)", ids["node2"], ids, after)
		}
		testbed.Eventually(t, converge, "node2 has the data again", func() string {
			if v, err := c.GetFrom("node2", "/k/a"); err != nil || v != "1" {
				return fmt.Sprintf("%q %v", v, err)
			}
			return ""
		})
	})
}
