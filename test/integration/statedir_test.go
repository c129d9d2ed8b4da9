package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
