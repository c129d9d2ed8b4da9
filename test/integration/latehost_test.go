package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestLateHostWhileNoLeader: node3's agent cannot be reached while the
// other two lose their data; its etcd keeps running and answers, without
// a leader. The cluster is recovered from a snapshot (a new cluster ID)
// with node3 assumed fenced (its host looked off), so nobody tells it. Its member
// has no leader for good; once it has had none for a while, its agent
// looks at the spec's other members, finds the recovered cluster and its
// record naming node3's old cluster, fences its old member and rejoins:
// three healthy voters, every key served (F9).
func TestLateHostWhileNoLeader(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.Extra, c.PerHostSpec = repairSpec, true
	c.WriteSpec()
	// recover cannot reach node3's agent (its address and its control
	// socket are elsewhere than the spec says): as for a host cut off.
	m3 := c.Member("node3")
	away := strings.Replace(c.SpecText(), fmt.Sprintf("agentAddr: %s:%d", m3.IP, m3.AgentPort), fmt.Sprintf("agentAddr: %s:%d", m3.IP, testbed.FreePort(t, m3.IP)), 1)
	away = strings.Replace(away, "{name}/state\n", "{name}/state-away\n", 1)
	if !strings.Contains(away, "state-away") {
		t.Fatalf("no state dir to move in the spec:\n%s", away)
	}
	c.WriteHostSpec("node3", away)
	startAll(c)
	c.WaitVoters(converge, c.AllNames()...)
	putKeys(t, c, "/k", 50)
	snapDir := filepath.Join(c.StateDir("node1"), "backups")
	if out, err := exec.Command(testbed.Binary, "backup", "save", "--config", c.Spec, "--name", "node1").CombinedOutput(); err != nil {
		t.Fatalf("backup save: %v\n%s", err, out)
	}
	snaps, _ := filepath.Glob(filepath.Join(snapDir, "*.db"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %v", snaps)
	}
	for _, name := range []string{"node1", "node2"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Eventually(t, converge, "node3 to run its member without a leader", func() string {
		if !c.LogContains("node3", `"decision":"waiting: local member has no leader"`) {
			return "not yet"
		}
		return ""
	})
	c.CorruptWAL("node1")
	c.CorruptWAL("node2")
	c.Start("node1")
	c.Start("node2")
	c.WaitPasses(converge, 2, "node1", "node2")
	start := time.Now()
	if _, err := recoverCLI(t, c, "--name", "node1", "--from-snapshot", snaps[0], "--yes", "--assume-fenced", "node3", "--wait", "0"); err != nil {
		t.Fatalf("recover --from-snapshot: %v", err)
	}
	c.WaitVoters(2*converge, c.AllNames()...)
	t.Logf("three healthy voters %.1fs after recover --yes", time.Since(start).Seconds())
	if !c.LogContains("node3", "was recovered from node1", "fencing my old member") {
		t.Errorf("node3 did not say that it learned of the recovery")
	}
	for _, name := range c.AllNames() {
		expectKeys(t, c, name, "/k", 50)
	}
}
