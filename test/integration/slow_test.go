package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// reconcileReadyDeadline is reconcile.ReadyDeadline: how long a running
// etcd may stay silent while its peers are healthy (the test bed does not
// import the system under test).
const reconcileReadyDeadline = 90 * time.Second

// shapeLoopback limits the traffic to ip:port on the loopback to rate (tc
// htb with a u32 filter; everything else passes at full speed) until the
// test ends. The qdisc is the machine's: only one test may shape at a time.
// The filter matches the address as well as the port: the tests running
// meanwhile have members on other loopback addresses, and a port number
// alone would shape theirs too if one had it.
func shapeLoopback(t *testing.T, ip string, port int, rate string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("shaping the loopback needs root")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("tc (iproute2) is not installed")
	}
	tc := func(args ...string) error {
		out, err := exec.Command("tc", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("tc %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	_ = tc("qdisc", "del", "dev", "lo", "root") // a leftover of a killed run
	t.Cleanup(func() { _ = tc("qdisc", "del", "dev", "lo", "root") })
	for _, args := range [][]string{
		{"qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "1"},
		// Everything else: a class far faster than any test's traffic, with
		// a burst and quantum that fit loopback's 64 KiB packets.
		{"class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit", "burst", "4mb", "cburst", "4mb", "quantum", "65536"},
		{"class", "add", "dev", "lo", "parent", "1:", "classid", "1:2", "htb", "rate", rate, "ceil", rate, "quantum", "65536"},
		{"filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", ip + "/32", "match", "ip", "dport", fmt.Sprint(port), "0xffff", "flowid", "1:2"},
	} {
		if err := tc(args...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSlowLearnerIsNotDead: a member joins a cluster with 20 MB of keys
// over a link shaped to 1.5 Mbit/s, with agent.learnerTimeout 5s. The
// leader's snapshot takes longer than the timeout and longer than the 90 s
// a running etcd may stay silent, but data keeps arriving: the new member
// must become a healthy voter without being removed as stale, stopped as
// silent, or added again.
func TestSlowLearnerIsNotDead(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.AgentExtra = "  learnerTimeout: 5s\n"
	c.Extra = repairSpec
	c.WriteSpec()
	startAll(c)
	c.WaitVoters(converge, c.AllNames()...)

	cli := c.Client()
	value := strings.Repeat("x", 100<<10)
	for i := range 200 { // 20 MB
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("big/%04d", i), value)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	m := c.AddMember()
	shapeLoopback(t, m.IP, m.PeerPort, "1500kbit") // into node4's peer port: the snapshot
	c.WriteSpec()
	start := time.Now()
	c.Start(m.Name)
	ids := c.WaitVoters(5*time.Minute, c.AllNames()...)
	took := time.Since(start)
	if took < reconcileReadyDeadline {
		t.Fatalf("node4 caught up in %s, before a silent etcd is stopped: the shaping did not slow the snapshot enough, the test proves nothing", took)
	}
	t.Logf("node4 (%x) became a voter after %s", ids[m.Name], took.Round(time.Second))

	for _, n := range c.AllNames() {
		if c.LogContains(n, `"msg":"membership change"`, `"kind":"remove"`) {
			t.Errorf("%s removed a member while node4 caught up", n)
		}
	}
	if c.LogContains(m.Name, "not answering for") {
		t.Errorf("node4's etcd was stopped as silent while it received the snapshot")
	}
	if j := c.Journal(m.Name); j != nil {
		if attempts, _ := j["attempts"].([]any); len(attempts) != 1 {
			t.Errorf("node4 was added %d times, want once", len(attempts))
		}
	}
	resp, err := cli.Get(context.Background(), "big/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 200 {
		t.Errorf("keys after the join: %v %v", resp, err)
	}
}
