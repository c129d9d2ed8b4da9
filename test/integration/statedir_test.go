package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// immutable makes path immutable (chattr +i: even root's rename over it
// fails with EPERM, as on a read-only or full state dir) until the test
// ends.
func immutable(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i %s: %v: %s (needs root on ext4, xfs or overlay)", path, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", path).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v: %s", path, err, out)
		}
	})
}

// TestRejoinWithUnwritableStateDir: a member whose data dir was lost
// rejoins while its marker cannot be written (member.json immutable: the
// rename of every write fails with EPERM, the path ENOSPC and EROFS
// take). The learner is still promoted and the cluster lock given back,
// so the cluster is back at three voters, and the agent's /readyz, its
// status and its metrics say the state dir cannot be written.
func TestRejoinWithUnwritableStateDir(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.AgentExtra = "  learnerTimeout: 20s\n"
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)

	if err := c.Stop("node3"); err != nil {
		t.Fatal(err)
	}
	// The disk was replaced: the old data is kept, out of the way.
	if err := os.Rename(c.DataDir("node3"), c.DataDir("node3")+".lost"); err != nil {
		t.Fatal(err)
	}
	immutable(t, filepath.Join(c.StateDir("node3"), "member.json"))
	start := time.Now()
	c.Start("node3")

	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node3"] == ids["node3"] {
		t.Fatalf("node3 kept member ID %x with an empty data dir", ids["node3"])
	}
	t.Logf("node3 a voter again %.1fs after its agent started, member.json immutable", time.Since(start).Seconds())
	testbed.Eventually(t, converge, "the cluster lock given back", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Client().Get(ctx, "/etcdkeeper/itest/lock", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return err.Error()
		}
		if len(resp.Kvs) > 0 {
			return fmt.Sprintf("lock key %s still held", resp.Kvs[0].Key)
		}
		return ""
	})
	m := c.Member("node3")
	base := fmt.Sprintf("http://%s:%d", m.IP, m.AgentPort)
	testbed.Eventually(t, converge, "node3's /readyz, status and metrics to say the state dir is not writable", func() string {
		code, body := get(t, base+"/readyz")
		if code == 200 || !strings.Contains(body, "state dir") {
			return fmt.Sprintf("/readyz: %d %q", code, body)
		}
		if _, st := get(t, base+"/status"); !strings.Contains(st, `"stateDirError"`) {
			return "/status has no stateDirError"
		}
		if _, mt := get(t, base+"/metrics"); !strings.Contains(mt, "etcdkeeper_state_dir_writable 0") {
			return "/metrics: etcdkeeper_state_dir_writable is not 0"
		}
		return ""
	})
	_, body := get(t, base+"/readyz")
	t.Logf("node3 /readyz: %s", strings.TrimSpace(body))
}

// etcdStarts are the bootstrap modes of every "etcd started" line of
// agent name's log, in order.
func etcdStarts(t *testing.T, c *testbed.Cluster, name string) []string {
	t.Helper()
	b, err := os.ReadFile(c.LogPath(name))
	if err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"msg":"etcd started"`) {
			continue
		}
		var e struct {
			Bootstrap string `json:"bootstrap"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		modes = append(modes, e.Bootstrap)
	}
	return modes
}

// TestRecoverForcesOnce: the source of a recovery whose journal cannot be
// written after its forced start (recovery.json immutable: its finish
// fails, the journal stays at forced) leads, the other two rejoin it;
// later, with no cluster in sight (both others down), its etcd dies. The
// agent starts it as it is, never with --force-new-cluster again (a
// one-member cluster next to the two that joined, F5); the finish that
// failed is in its log, its status and its metrics.
func TestRecoverForcesOnce(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 30)
	for _, name := range c.AllNames() {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	// The agent stops right after it journaled the forced start: from then
	// on the journal cannot be written.
	c.Start("node1", "ETCDKEEPER_TEST_CRASH_AT=recover-force")
	c.WaitPasses(converge, 2, "node1")
	if _, err := recoverCLI(t, c, "--from", "node1", "--yes", "--assume-fenced", "node2,node3", "--wait", "0"); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if err := c.WaitExit("node1", converge); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("node1's agent did not stop at the crash point: %v", err)
	}
	journal := filepath.Join(c.StateDir("node1"), "recovery.json")
	immutable(t, journal)
	c.Start("node1")
	c.WaitVoters(converge, "node1")
	c.Start("node2")
	c.Start("node3")
	c.WaitVoters(converge, c.AllNames()...)
	if b, err := os.ReadFile(journal); err != nil || !strings.Contains(string(b), `"step": "forced"`) {
		t.Fatalf("node1's journal: %s %v, want it left at forced", b, err)
	}
	// No cluster in sight: the others are down, and node1's etcd dies.
	for _, name := range []string{"node2", "node3"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	before := etcdStarts(t, c, "node1")
	t.Logf("node1's etcd started so far: %v", before)
	if err := syscall.Kill(c.EtcdPID("node1"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after []string
	testbed.Eventually(t, converge, "node1's etcd started again", func() string {
		if after = etcdStarts(t, c, "node1"); len(after) <= len(before) {
			return fmt.Sprintf("%d starts", len(after))
		}
		return ""
	})
	if mode := after[len(before)]; mode != "as-is" {
		t.Fatalf("node1's etcd, killed with no cluster in sight after its forced start took and two members joined, was started %s; want as-is (never forced twice)", mode)
	}
	m := c.Member("node1")
	base := fmt.Sprintf("http://%s:%d", m.IP, m.AgentPort)
	testbed.Eventually(t, converge, "node1's status and metrics to say the recovery cannot be finished", func() string {
		if _, st := get(t, base+"/status"); !strings.Contains(st, `"recoveryFinishError"`) {
			return "/status has no recoveryFinishError"
		}
		if _, mt := get(t, base+"/metrics"); !strings.Contains(mt, "etcdkeeper_recovery_unfinished 1") {
			return "/metrics: etcdkeeper_recovery_unfinished is not 1"
		}
		return ""
	})

	c.Start("node2")
	c.Start("node3")
	c.WaitVoters(converge, c.AllNames()...)
	for _, name := range c.AllNames() {
		expectKeys(t, c, name, "/k", 30)
	}
}
