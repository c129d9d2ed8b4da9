package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// repairSpec lets a test repair the same member several times in an hour.
const repairSpec = "repair:\n  maxPerHour: 50\n"

// runningCluster starts n agents with extra spec YAML and waits for n
// healthy voters; it returns the cluster and the member IDs by name.
func runningCluster(t *testing.T, n int, extra string) (*testbed.Cluster, map[string]uint64) {
	t.Helper()
	c := testbed.New(t, n)
	c.Extra = extra
	c.WriteSpec()
	startAll(c)
	return c, c.WaitVoters(converge, c.AllNames()...)
}

func startAll(c *testbed.Cluster) {
	for _, m := range c.Members {
		c.Start(m.Name)
	}
}

func putKeys(t *testing.T, c *testbed.Cluster, prefix string, n int) {
	t.Helper()
	cli := c.Client()
	for i := 0; i < n; i++ {
		testbed.Put(t, cli, fmt.Sprintf("%s/%04d", prefix, i), fmt.Sprintf("value-%d", i))
	}
}

// logged waits (30 s at most) until one of names' agents logged a line with
// every part, and returns that agent's name. The agents log an action's
// line after its call returned: the cluster may show the change (a
// promoted voter, a removed member, no alarm) before the line is there.
func logged(t *testing.T, c *testbed.Cluster, what string, names []string, parts ...string) string {
	t.Helper()
	var who string
	testbed.Eventually(t, 30*time.Second, what, func() string {
		for _, n := range names {
			if c.LogContains(n, parts...) {
				who = n
				return ""
			}
		}
		return fmt.Sprintf("no such line in the logs of %v", names)
	})
	return who
}

// expectKeys checks that member name itself serves every key.
func expectKeys(t *testing.T, c *testbed.Cluster, name, prefix string, n int) {
	t.Helper()
	testbed.Eventually(t, converge, name+" serves every key written before", func() string {
		cli := c.Client(name)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
		if err != nil {
			return err.Error()
		}
		if resp.Count != int64(n) {
			return fmt.Sprintf("%d of %d keys", resp.Count, n)
		}
		return ""
	})
}

// journalDone waits until member name's agent has closed its rejoin
// journal (step done). The agent closes it in the pass after the one that
// found its member a healthy voter, so WaitVoters can see the voter first;
// an agent stopped in between leaves the journal open, and the next agent
// on that host resumes it instead of starting a repair of its own.
func journalDone(t *testing.T, c *testbed.Cluster, name string) {
	t.Helper()
	testbed.Eventually(t, converge, name+"'s agent closes its rejoin journal (step done)", func() string {
		if j := c.Journal(name); j == nil || j["step"] != "done" {
			return fmt.Sprintf("journal %v", j)
		}
		return ""
	})
}

// TestRepairCorruptWAL: a stopped member's WAL is corrupted; its agent
// starts, finds the corruption, and repairs it: new member ID, every key
// readable on it, the old data dir kept, a snapshot kept, no failed write.
func TestRepairCorruptWAL(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/before", 100)

	w := c.StartWriter("/during", 2*time.Second, "node1", "node3")
	if err := c.Stop("node2"); err != nil {
		t.Fatal(err)
	}
	wal := c.CorruptWAL("node2")
	c.Start("node2")
	after := c.WaitVoters(converge, c.AllNames()...)
	w.Stop()

	if after["node2"] == ids["node2"] {
		t.Fatalf("node2 kept member ID %x; a repaired member must rejoin as a new member", ids["node2"])
	}
	expectKeys(t, c, "node2", "/before", 100)
	backups := c.Backups("node2")
	if len(backups) != 1 {
		t.Fatalf("backups of node2 = %v, want exactly one moved-aside data dir", backups)
	}
	if _, err := os.Stat(filepath.Join(backups[0], "member", "wal", filepath.Base(wal))); err != nil {
		t.Fatalf("the corrupt WAL is not kept in the backup: %v", err)
	}
	snaps, _ := filepath.Glob(filepath.Join(c.StateDir("node2"), "snapshots", "*.db"))
	if len(snaps) != 1 {
		t.Errorf("snapshots kept in the state dir: %v, want one", snaps)
	}
	journalDone(t, c, "node2")
	if !c.LogContains("node2", "rejoin started", "data is corrupt") {
		t.Errorf("node2's agent did not log the corruption it found")
	}
	if f := w.Failed.Load(); f > 0 {
		t.Errorf("%d writes failed during the repair (ok %d): %v", f, w.OK.Load(), w.LastErr.Load())
	}
	t.Logf("writes during the repair: %d ok, %d failed", w.OK.Load(), w.Failed.Load())
}

// TestRepairWhileRunning: the WAL of a running member is damaged and its
// etcd is killed; the restart finds the corruption and repairs it.
func TestRepairWhileRunning(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 50)

	pid := c.EtcdPID("node3")
	c.CorruptWAL("node3")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node3"] == ids["node3"] {
		t.Fatalf("node3 kept member ID %x after corruption", ids["node3"])
	}
	expectKeys(t, c, "node3", "/k", 50)
	if len(c.Backups("node3")) != 1 {
		t.Fatalf("backups of node3 = %v, want one", c.Backups("node3"))
	}
}

// TestRepairRefusedWithoutQuorum: two of three members are corrupt. The
// one healthy member alone is no quorum, so nothing may change: no file
// moved, no member removed, and the agents say why.
func TestRepairRefusedWithoutQuorum(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 20)

	for _, n := range []string{"node2", "node3"} {
		if err := c.Stop(n); err != nil {
			t.Fatal(err)
		}
	}
	sums := map[string]string{}
	for _, n := range []string{"node2", "node3"} {
		wal := c.CorruptWAL(n)
		sums[n] = fileSum(t, wal)
		c.Start(n)
	}
	for _, n := range []string{"node2", "node3"} {
		testbed.Eventually(t, converge, n+" reports that quorum is lost", func() string {
			if !c.LogContains(n, "quorum lost: manual recovery needed") {
				return "not yet"
			}
			return ""
		})
	}
	// Several more passes of the agents: still nothing moved.
	c.WaitPasses(converge, 3, "node2", "node3")
	for _, n := range []string{"node2", "node3"} {
		if b := c.Backups(n); len(b) != 0 {
			t.Errorf("%s: data moved aside without quorum: %v", n, b)
		}
		files, _ := filepath.Glob(filepath.Join(c.DataDir(n), "member", "wal", "*.wal"))
		if len(files) == 0 || fileSum(t, files[0]) != sums[n] {
			t.Errorf("%s: the corrupt WAL was changed or moved", n)
		}
	}
	cli := c.Client("node1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("member list changed: %d members", len(resp.Members))
	}
	for _, m := range resp.Members {
		if ids[m.Name] != m.ID {
			t.Errorf("member %s has ID %x, want %x (unchanged)", m.Name, m.ID, ids[m.Name])
		}
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestRepairSurvivesCrashAtEachStep kills the agent (as hard as kill -9:
// the test crash point exits at once and the kernel kills etcd with it)
// right before each step's side effect, and right after it (before the
// journal knows), restarts it, and expects exactly three healthy voters,
// no learner left and every key on the repaired member. Two clusters, at
// the same time, each repair node2 once per crash point of theirs in turn:
// the crash points before a side effect, and those right after one.
func TestRepairSurvivesCrashAtEachStep(t *testing.T) {
	t.Parallel()
	for _, g := range []struct {
		name  string
		steps []string
	}{
		{"before", []string{"snapshot", "remove", "move", "add", "start"}},
		{"after", []string{"after-snapshot", "after-remove", "after-move", "after-add", "after-start"}},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			repairCrashingAt(t, g.steps)
		})
	}
}

// repairCrashingAt repairs node2 of a cluster of its own once per crash
// point in steps, in turn (see TestRepairSurvivesCrashAtEachStep).
func repairCrashingAt(t *testing.T, steps []string) {
	c, _ := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 30)
	repairs := 0 // the crash points -run selected
	for _, step := range steps {
		t.Run("crash at "+step, func(t *testing.T) {
			repairs++
			before := c.WaitVoters(converge, c.AllNames()...)
			if err := c.Stop("node2"); err != nil {
				t.Fatal(err)
			}
			c.CorruptWAL("node2")
			c.Start("node2", "ETCDKEEPER_TEST_CRASH_AT="+step)
			if err := c.WaitExit("node2", converge); err == nil || !strings.Contains(err.Error(), "exit status 3") {
				t.Fatalf("agent did not stop at the crash point %s: %v", step, err)
			}
			c.Start("node2")
			after := c.WaitVoters(converge, c.AllNames()...)
			if after["node2"] == before["node2"] {
				t.Fatalf("node2 kept member ID %x", before["node2"])
			}
			expectKeys(t, c, "node2", "/k", 30)
			// The repair is over only once the journal is closed: stopped
			// before that, the next crash-point agent would resume this
			// journal (its snapshot taken, its steps done) and never reach
			// its own crash point.
			journalDone(t, c, "node2")
		})
	}
	if n := len(c.Backups("node2")); n != repairs {
		t.Errorf("node2 has %d moved-aside data dirs, want %d (one per repair, none lost, none twice)", n, repairs)
	}
}

// TestRepairGuards: a repair refused by a guard changes nothing. First
// the free-space check (repair.minFreeMB larger than any disk), then the
// rate limit (repair.maxPerHour: 1, second corruption within the hour).
func TestRepairGuards(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, "repair:\n  maxPerHour: 1\n  minFreeMB: 1000000000\n")
	putKeys(t, c, "/k", 10)

	refused := func(why string) {
		t.Helper()
		backups := len(c.Backups("node2"))
		if err := c.Stop("node2"); err != nil {
			t.Fatal(err)
		}
		c.CorruptWAL("node2")
		c.Start("node2")
		testbed.Eventually(t, converge, "node2's agent refuses: "+why, func() string {
			if !c.LogContains("node2", why) {
				return "not logged"
			}
			return ""
		})
		o, err := testbed.Await(c.Client("node1", "node3"), converge, time.Second, testbed.Answered)
		if err != nil {
			t.Fatal(err)
		}
		if id := o.ID("node2"); id != ids["node2"] {
			t.Fatalf("node2 listed as %x, want %x: re-added although the repair was refused", id, ids["node2"])
		}
		if len(o.Members) != 3 {
			t.Fatalf("member list changed: %v", o.Members)
		}
		if b := c.Backups("node2"); len(b) != backups {
			t.Fatalf("data moved although the repair was refused: %v", b)
		}
	}
	refused("not enough free space")

	// Enough space now: the repair runs (the first of this hour).
	c.Extra = "repair:\n  maxPerHour: 1\n"
	c.WriteSpec()
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node2"] == ids["node2"] {
		t.Fatalf("node2 not repaired once the space check passed")
	}
	ids = after
	refused("rate limit")
}
