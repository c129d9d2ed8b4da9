package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestSettingsRestartWaitsForFrozenMember: node3's disk hangs (fsfreeze
// of the ext4 image its data dir is on). Its etcd keeps answering its
// status with its last leader and a frozen index, so it looks healthy.
// Then the spec changes an etcd setting. node1 and node2 must not
// restart their etcd while node3 does not catch up: either restart would
// leave writes waiting on node3 for as long as its disk hangs (F4 of the
// 2026-12-01 review). Once the disk is back, all three restart, one at a
// time.
func TestSettingsRestartWaitsForFrozenMember(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a loop device needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "fsfreeze", "mount", "umount", "truncate"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	c := testbed.New(t, 3)
	// Each host its own spec copy: the edit reaches node1 and node2 only,
	// so that node3's agent (whose own stop would hang on the frozen
	// disk) has nothing to do.
	c.PerHostSpec = true
	dir := filepath.Join(c.Dir, "node3") // its data dir, state dir and spec
	img := filepath.Join(c.Dir, "node3.img")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"truncate", "-s", "512M", img}, {"mkfs.ext4", "-q", img}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount here: %v: %s", err, out)
	}
	c.WriteSpec() // node3's copy on its disk too, as its state
	frozen := false
	thaw := func() {
		if frozen {
			if out, err := exec.Command("fsfreeze", "--unfreeze", dir).CombinedOutput(); err != nil {
				t.Errorf("unfreeze: %v: %s", err, out)
			}
			frozen = false
		}
	}
	t.Cleanup(func() {
		thaw()
		_ = c.Stop("node3")
		if err := exec.Command("umount", dir).Run(); err != nil {
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	moveLeaderOff(t, c, "node3", ids)
	putKeys(t, c, "before", 20)
	c.WaitPasses(converge, 2, c.AllNames()...)
	pids := map[string]int{"node1": c.EtcdPID("node1"), "node2": c.EtcdPID("node2")}

	// Freeze a quiet member: with its raft loop stuck on a WAL write,
	// etcd's Status answers from memory; with its backend stuck in a
	// commit (every 100 ms while there is something to commit), it
	// would not answer at all, a case the plain rule handles already.
	// A freeze that catches the backend mid-commit leaves a member that
	// answers nothing: thaw and freeze again (a few tries), rather than
	// fail on a case this test is not about.
	var w *testbed.Writer
	for try := 1; ; try++ {
		time.Sleep(time.Second)
		if out, err := exec.Command("fsfreeze", "--freeze", dir).CombinedOutput(); err != nil {
			t.Fatalf("fsfreeze: %v: %s", err, out)
		}
		frozen = true
		w = c.StartWriter("load", 10*time.Second, "node1", "node2")
		why := ""
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if why = staleStatus(c, "node3"); why == "" {
				break
			}
		}
		if why == "" {
			break
		}
		w.Stop()
		thaw()
		if try == 4 {
			t.Fatalf("node3 to answer with a stale index: not in %d freezes: %s", try, why)
		}
		t.Logf("freeze %d: node3 does not answer with a stale index (%s): thawing, freezing again", try, why)
		c.WaitPasses(converge, 2, "node1", "node2")
	}
	defer w.Stop()

	text := strings.Replace(c.SpecText(), "    log-level: warn\n", "    log-level: warn\n    heartbeat-interval: \"120\"\n", 1)
	for _, name := range []string{"node1", "node2"} {
		c.WriteHostSpec(name, text)
		if err := c.Signal(name, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	notRestarted := func() {
		for name, pid := range pids {
			if got := c.EtcdPID(name); got != pid || !testbed.Alive(pid) {
				t.Fatalf("%s's etcd was restarted (pid %d, was %d) while node3's disk hung", name, got, pid)
			}
		}
	}
	for _, name := range []string{"node1", "node2"} {
		testbed.Eventually(t, converge, name+"'s agent to wait for node3", func() string {
			notRestarted()
			if !c.LogContains(name, "restart due (changed settings); not restarting while the others have 1 of 2 voters caught up", "node3 is not catching up") {
				return "no such decision logged yet"
			}
			return ""
		})
	}
	notRestarted()
	if w.Failed.Load() > 0 {
		t.Errorf("%d writes failed while nothing was restarted: %v", w.Failed.Load(), w.LastErr.Load())
	}

	thaw()
	c.WriteHostSpec("node3", text)
	testbed.Eventually(t, 3*converge, "node1 and node2 restarted with the new settings", func() string {
		for name, pid := range pids {
			if got := c.EtcdPID(name); got == pid || got == 0 {
				return name + " not restarted yet"
			}
		}
		return ""
	})
	c.WaitVoters(converge, c.AllNames()...)
}

// staleStatus is "" when member name answers its status with a leader and
// a committed index below the leader's.
func staleStatus(c *testbed.Cluster, name string) string {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Member(name).ClientURL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, c.Member(name).ClientURL())
	if err != nil {
		return fmt.Sprintf("status of %s: %v", name, err)
	}
	lead, err := cli.Status(ctx, c.Member("node1").ClientURL())
	if err != nil {
		return fmt.Sprintf("status of node1: %v", err)
	}
	if st.Leader == 0 || st.RaftIndex >= lead.RaftIndex {
		return fmt.Sprintf("%s: leader %x, index %d, node1's %d", name, st.Leader, st.RaftIndex, lead.RaftIndex)
	}
	return ""
}

// moveLeaderOff hands leadership from name to another member if it leads:
// a frozen leader is replaced by an election, another story.
func moveLeaderOff(t *testing.T, c *testbed.Cluster, name string, ids map[string]uint64) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Member(name).ClientURL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, c.Member(name).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != ids[name] {
		return
	}
	for other, id := range ids {
		if other != name {
			if _, err := cli.MoveLeader(ctx, id); err != nil {
				t.Fatalf("move leader to %s: %v", other, err)
			}
			return
		}
	}
}
