package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestUnmountedDataDir: node2's data dir is a filesystem of its own (a
// tmpfs standing in for a disk). When it is not mounted, the data dir is
// an empty dir on its parent's filesystem: the agent waits ("data dir not
// mounted?") and node2 stays a member. A new disk mounted there (another
// filesystem) heals as usual: node2 rejoins under a new ID with every key.
func TestUnmountedDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	t.Parallel()
	c := testbed.New(t, 3)
	dir := c.DataDir("node2")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mount := func() {
		t.Helper()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
		}
	}
	umount := func() error { return exec.Command("umount", dir).Run() }
	mount()
	t.Cleanup(func() {
		_ = c.Stop("node2") // its etcd keeps the mount busy
		for umount() == nil {
		}
	})
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	putKeys(t, c, "mnt", 10)
	// node2's agent records its member (and the data dir's filesystem)
	// once its etcd answers it: a few passes after the cluster serves.
	testbed.Eventually(t, converge, "node2's agent to record its member", func() string {
		if _, err := os.Stat(filepath.Join(c.StateDir("node2"), "member.json")); err != nil {
			return err.Error()
		}
		return ""
	})

	if err := c.Stop("node2"); err != nil {
		t.Fatal(err)
	}
	if err := umount(); err != nil {
		t.Fatalf("umount %s: %v", dir, err)
	}
	c.Start("node2")
	testbed.Eventually(t, converge, "node2's agent to notice the missing mount", func() string {
		if !c.LogContains("node2", "data dir not mounted?") {
			return "not logged yet"
		}
		return ""
	})
	o, err := testbed.Await(c.Client("node1", "node3"), converge, time.Second, testbed.Answered)
	if err != nil {
		t.Fatal(err)
	}
	if id := o.ID("node2"); id != ids["node2"] {
		t.Fatalf("node2 listed as %x, want %x: its member was replaced while its disk was only unmounted", id, ids["node2"])
	}

	mount() // a new, empty disk
	got := c.WaitVoters(converge, c.AllNames()...)
	if got["node2"] == ids["node2"] {
		t.Errorf("node2 kept member %x on a new empty disk", got["node2"])
	}
	expectKeys(t, c, "node2", "mnt", 10)
}
