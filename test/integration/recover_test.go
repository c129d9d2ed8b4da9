package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// recoverCLI runs etcdkeeper recover with args and returns its output.
func recoverCLI(t *testing.T, c *testbed.Cluster, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	out, err := exec.CommandContext(ctx, testbed.Binary, append([]string{"recover", "--config", c.Spec}, args...)...).CombinedOutput()
	t.Logf("etcdkeeper recover %s:\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// recoverKeys is how many 1 KiB keys the recovery tests write: ~1 MB by
// default; ETCDKEEPER_RECOVER_MB sets another size, for measuring.
func recoverKeys() int {
	if mb, err := strconv.Atoi(os.Getenv("ETCDKEEPER_RECOVER_MB")); err == nil && mb > 0 {
		return mb * 1024
	}
	return 1000
}

func putBulk(t *testing.T, c *testbed.Cluster, prefix string, n int) {
	t.Helper()
	cli := c.Client()
	val := strings.Repeat("v", 1024)
	for i := 0; i < n; i += 100 {
		ops := []clientv3.Op{}
		for k := i; k < min(i+100, n); k++ {
			ops = append(ops, clientv3.OpPut(prefix+"/"+strconv.Itoa(100000+k), val))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("put: %v", err)
		}
	}
}

// TestRecoverFromMember: refused on a healthy cluster with nothing
// changed. Then quorum is lost: node2's data is corrupt and node3's host
// is off. recover's plan names node1; recover --from node1 --yes gives a
// one-member cluster with node1's member ID and every key, node2 rejoins
// it (its corrupt data moved aside, kept), and node3, back after the
// recovery, rejoins too: three healthy voters.
func TestRecoverFromMember(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	n := recoverKeys()
	putBulk(t, c, "/k", n)

	out, err := recoverCLI(t, c, "--from", "node1", "--yes")
	if err == nil || !strings.Contains(out, "recovery refused: a quorum of voters is healthy") {
		t.Fatalf("recover on a healthy cluster: err %v, want a refusal", err)
	}
	for _, name := range c.AllNames() {
		if _, err := os.Stat(filepath.Join(c.StateDir(name), "recovery.json")); err == nil {
			t.Errorf("%s has a recovery journal after a refused recovery", name)
		}
	}
	if after := c.WaitVoters(converge, c.AllNames()...); after["node1"] != ids["node1"] || after["node2"] != ids["node2"] || after["node3"] != ids["node3"] {
		t.Fatalf("members changed after a refused recovery: %v, were %v", after, ids)
	}

	loseQuorum(t, c)

	out, err = recoverCLI(t, c)
	if err != nil {
		t.Fatalf("recover (plan): %v", err)
	}
	for _, want := range []string{"Quorum: NOT healthy", "Recommendation: recover from node1", "node3: agent not reached"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if len(c.Backups("node2")) != 0 {
		t.Fatalf("the plan moved data: %v", c.Backups("node2"))
	}

	start := time.Now()
	out, err = recoverCLI(t, c, "--from", "node1", "--yes", "--wait", "0")
	if err != nil {
		t.Fatalf("recover --from node1 --yes: %v", err)
	}
	if !strings.Contains(out, "node2: fenced") || !strings.Contains(out, "node3 was not reached: on node3, run: etcdkeeper recover") {
		t.Errorf("recover does not say that node2 was fenced and node3 not reached")
	}
	after := c.WaitVoters(converge, "node1", "node2")
	t.Logf("recovery from node1 (%d KiB of keys): 2 healthy voters %.1fs after recover --yes", n, time.Since(start).Seconds())
	if after["node1"] != ids["node1"] {
		t.Errorf("node1 is member %x after the recovery, was %x: the source keeps its member ID", after["node1"], ids["node1"])
	}
	if after["node2"] == ids["node2"] {
		t.Errorf("node2 kept member ID %x: it must rejoin as a new member", ids["node2"])
	}
	if b := c.Backups("node2"); len(b) != 1 {
		t.Errorf("node2's corrupt data: %v, want it moved aside once", b)
	}

	c.Start("node3") // its host was off during the recovery
	after = c.WaitVoters(converge, c.AllNames()...)
	t.Logf("node3 back: 3 healthy voters %.1fs after recover --yes", time.Since(start).Seconds())
	if after["node3"] == ids["node3"] {
		t.Errorf("node3 started its old member %x after the recovery", ids["node3"])
	}
	if b := c.Backups("node3"); len(b) != 1 {
		t.Errorf("node3's old data: %v, want it moved aside once", b)
	}
	for _, name := range c.AllNames() {
		expectKeys(t, c, name, "/k", n)
	}
	testbed.Eventually(t, converge, "node1's recovery journal to say done", func() string {
		b, err := os.ReadFile(filepath.Join(c.StateDir("node1"), "recovery.json"))
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(string(b), `"step": "done"`) {
			return string(b)
		}
		return ""
	})
	// The source's steps reach the recovered cluster once it is done.
	testbed.Eventually(t, converge, "history lists node1's recovery, in the cluster", func() string {
		mine, why := historyOf(t, c, "node1")
		if why != "" {
			return why
		}
		evs, why := inOrder(mine, "recovery-requested", "recovery-stopped", "recovery-forced", "recovery-done")
		if why != "" {
			return why
		}
		return inClusterHistory(c, evs["recovery-done"])
	})
	mine, _ := historyOf(t, c, "node2")
	if _, why := inOrder(mine, "recovery-fenced", "add-learner", "promote", "recovery-done"); why != "" {
		t.Errorf("node2's history: %s", why)
	}
	logHistory(t, c)
}

// TestRecoverFromSnapshot: two members' data is corrupt and the third
// host is off. recover's plan finds no usable data and points to the
// verified snapshot; the recovery from it is killed right before the
// restore and resumes when the agent starts again. node3, back after the
// recovery with its old cluster's data, learns of the recovery from the
// recovered cluster's record and rejoins: three healthy voters in a new
// cluster that serves every key of the snapshot at a revision bumped past
// it, every old data dir kept.
func TestRecoverFromSnapshot(t *testing.T) {
	t.Parallel()
	// Killed before the restore, and after its rename before the journal
	// knows: each resumes.
	for _, crash := range []string{"recover-restore", "after-recover-restore"} {
		t.Run("crash at "+crash, func(t *testing.T) {
			t.Parallel()
			recoverFromSnapshot(t, crash, false)
		})
	}
	// Encrypted: killed after the decryption, before the restore read it.
	t.Run("encrypted, crash at recover-restore", func(t *testing.T) {
		t.Parallel()
		recoverFromSnapshot(t, "recover-restore", true)
	})
}

// recoverFromSnapshot: with encrypted, the snapshot is age's and holds a
// known secret, and every file on a disk that the recovery writes (in
// every host's dirs and the agents' TMPDIR) is read every few ms: none
// but etcd's own data holds the secret. The plaintext is in memory
// (/dev/shm) when the agent is killed, and is gone after the resumed
// restore.
func recoverFromSnapshot(t *testing.T, crash string, encrypted bool) {
	extra, env, tmp := repairSpec, []string{}, ""
	if encrypted {
		key := filepath.Join(t.TempDir(), "backup.key")
		out, err := exec.Command(testbed.Binary, "backup", "keygen", "--out", key).Output()
		if err != nil {
			t.Fatalf("backup keygen: %v", err)
		}
		extra += fmt.Sprintf("backup:\n  interval: 0s\n  encryption:\n    recipients: [%s]\n    identityFile: %s\n", strings.TrimSpace(string(out)), key)
		tmp = t.TempDir()
		env = append(env, "TMPDIR="+tmp)
	}
	c := testbed.New(t, 3)
	c.Extra = extra
	c.WriteSpec()
	for _, name := range c.AllNames() {
		c.Start(name, env...)
	}
	c.WaitVoters(converge, c.AllNames()...)
	putKeys(t, c, "/k", 200)
	var secret []byte
	var watch *plaintextWatch
	if encrypted {
		secret = []byte("etcdkeeper-itest-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36))
		testbed.Put(t, c.Client(), "/registry/secrets/default/db-password", string(secret))
		watch = watchPlaintext(secret, c.Dir, tmp)
		defer func() {
			if watch != nil {
				watch.stop()
			}
		}()
	}
	// Into node1's backup dir, where its agent finds it for the plan.
	snapDir := filepath.Join(c.StateDir("node1"), "backups")
	if out, err := exec.Command(testbed.Binary, "backup", "save", "--config", c.Spec, "--name", "node1").CombinedOutput(); err != nil {
		t.Fatalf("backup save: %v\n%s", err, out)
	}
	snaps, _ := filepath.Glob(filepath.Join(snapDir, "*.db"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %v", snaps)
	}
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cli.Get(ctx, "/k/0000")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	oldRev, oldCluster := resp.Header.Revision, resp.Header.ClusterId

	for _, name := range c.AllNames() {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	// node1 and node2 corrupt; node3's host is off during the recovery,
	// its data intact but of the old cluster.
	c.CorruptWAL("node1")
	c.CorruptWAL("node2")
	c.Start("node1", append(env, "ETCDKEEPER_TEST_CRASH_AT="+crash)...)
	c.Start("node2", env...)
	c.WaitPasses(converge, 2, "node1", "node2")
	out, err := recoverCLI(t, c)
	if err != nil || !strings.Contains(out, "no member's data is usable: recover from the newest verified snapshot, "+snaps[0]+" on node1") {
		t.Fatalf("plan: err %v; want no usable data and node1's snapshot", err)
	}
	if encrypted && fileHolds(snaps[0], secret) {
		t.Fatalf("the snapshot %s holds the secret: not encrypted", snaps[0])
	}
	if _, err := recoverCLI(t, c, "--name", "node1", "--from-snapshot", snaps[0], "--yes", "--wait", "0"); err != nil {
		t.Fatalf("recover --from-snapshot: %v", err)
	}
	if err := c.WaitExit("node1", converge); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("node1's agent did not stop at the crash point: %v", err)
	}
	if encrypted {
		// Killed with the snapshot decrypted and not yet restored: its
		// plaintext is in memory, and nowhere on a disk (the watch). Only
		// said: any etcdkeeper on this host that restores (another test's)
		// sweeps a dead agent's scratch dir at once.
		t.Logf("killed after the decryption: the plaintext in %v", filesHolding("/dev/shm", secret))
	}
	c.Start("node1", env...)
	c.WaitVoters(converge, "node1", "node2")
	c.Start("node3", env...) // back: it learns of the recovery from the recovered cluster
	c.WaitVoters(converge, c.AllNames()...)
	if encrypted {
		watch.stop()
		hits, seen := watch.hits()
		watch = nil
		for _, h := range hits {
			t.Errorf("%s held the secret: a plaintext copy on a disk", h)
		}
		if left := filesHolding("/dev/shm", secret); len(left) > 0 {
			t.Errorf("the plaintext left in memory after the restore: %v", left)
		}
		// The watch can fail: etcd's data, which it skips, holds the secret.
		if len(filesHolding(filepath.Join(c.DataDir("node1"), "member"), secret)) == 0 {
			t.Errorf("the secret is nowhere in node1's restored data: the watch would miss a copy")
		}
		t.Logf("%d files read during the snapshot and the recovery, %d held the secret", seen, len(hits))
	}
	if !c.LogContains("node3", "was recovered from node1", "fencing my old member") {
		t.Errorf("node3 did not say that it learned of the recovery")
	}
	for _, name := range c.AllNames() {
		expectKeys(t, c, name, "/k", 200)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err = c.Client().Get(ctx, "/k/0000")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision < oldRev+1_000_000_000 {
		t.Errorf("revision %d after the restore, want past %d + 1e9: watchers must never see it go back", resp.Header.Revision, oldRev)
	}
	if resp.Header.ClusterId == oldCluster {
		t.Errorf("the restored cluster kept the old cluster ID %x", oldCluster)
	}
	for _, name := range c.AllNames() {
		if b := c.Backups(name); len(b) != 1 {
			t.Errorf("%s: moved-aside data dirs %v, want one (its corrupt data, kept)", name, b)
		}
	}
}

// TestRecoverSurvivesCrash kills the source's agent (exit at once, as
// hard as kill -9: its etcd dies with it) right before each step of a
// recovery from its data, starts it again, and expects the recovery to
// resume and end with three healthy voters, the source's member ID kept.
func TestRecoverSurvivesCrash(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"recover-stop", "recover-force"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			c, ids := runningCluster(t, 3, repairSpec)
			putKeys(t, c, "/k", 30)
			for _, name := range c.AllNames() {
				if err := c.Stop(name); err != nil {
					t.Fatal(err)
				}
			}
			c.CorruptWAL("node2")
			c.CorruptWAL("node3")
			c.Start("node1", "ETCDKEEPER_TEST_CRASH_AT="+step)
			c.Start("node2")
			c.Start("node3")
			c.WaitPasses(converge, 2, c.AllNames()...)
			if _, err := recoverCLI(t, c, "--from", "node1", "--yes", "--wait", "0"); err != nil {
				t.Fatalf("recover: %v", err)
			}
			if err := c.WaitExit("node1", converge); err == nil || !strings.Contains(err.Error(), "exit status 3") {
				t.Fatalf("node1's agent did not stop at the crash point %s: %v", step, err)
			}
			// status shows the recovery under way, though etcd cannot.
			out, _ := exec.Command(testbed.Binary, "status", "--config", c.Spec).CombinedOutput()
			if !strings.Contains(string(out), "Recovery in progress on node2: ") || !strings.Contains(string(out), " fenced fenced") {
				t.Errorf("status does not show the recovery under way:\n%s", out)
			}
			c.Start("node1")
			after := c.WaitVoters(converge, c.AllNames()...)
			if after["node1"] != ids["node1"] {
				t.Errorf("node1 is member %x, was %x", after["node1"], ids["node1"])
			}
			for _, name := range c.AllNames() {
				expectKeys(t, c, name, "/k", 30)
			}
		})
	}
}

// TestRecoverHostByHost: no agent reaches another (agent.addr on
// loopback, as by default on real hosts): each host's view of the spec
// reaches only its own agent. The others are fenced on their own hosts
// first, with one --id; on the source, recover refuses until told that
// they are (--assume-fenced), then the recovery runs and all three are
// healthy voters again.
func TestRecoverHostByHost(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 30)
	// Both down before either starts again: one started while the other
	// still ran would be repaired (removed, its data moved aside) with
	// the other's help, and would no longer be a voter to fence.
	for _, name := range []string{"node2", "node3"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
		c.CorruptWAL(name)
	}
	for _, name := range []string{"node2", "node3"} {
		c.Start(name)
	}
	c.WaitPasses(converge, 2, c.AllNames()...)
	// view writes the spec as host name sees it: every other agent's
	// address is one nobody listens on, and only its own agent's state
	// dir (with the control socket) is there.
	view := func(name string) string {
		text := c.SpecText()
		for _, m := range c.Members {
			if m.Name != name {
				text = strings.Replace(text, fmt.Sprintf("agentAddr: %s:%d", m.IP, m.AgentPort), fmt.Sprintf("agentAddr: %s:1", m.IP), 1)
			}
		}
		return hostView(t, c, name, text)
	}
	run := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), converge)
		defer cancel()
		out, err := exec.CommandContext(ctx, testbed.Binary, append([]string{"recover", "--config", view(name), "--name", name, "--from", "node1", "--yes", "--id", "r1", "--wait", "0"}, args...)...).CombinedOutput()
		t.Logf("on %s: etcdkeeper recover ... %s:\n%s", name, strings.Join(args, " "), out)
		return string(out), err
	}
	out, err := run("node1")
	if err == nil || !strings.Contains(out, "node2, node3 cannot be fenced from here") {
		t.Fatalf("on node1 first: err %v, want a refusal (node2 and node3 could be a quorum)", err)
	}
	for _, name := range []string{"node2", "node3"} {
		out, err := run(name)
		if err != nil || !strings.Contains(out, name+": fenced") || !strings.Contains(out, "node1 (the source) was not reached") {
			t.Fatalf("on %s: err %v, want its agent fenced and the command for node1", name, err)
		}
	}
	if _, err := run("node1", "--assume-fenced", "node2,node3"); err != nil {
		t.Fatalf("on node1: %v", err)
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node1"] != ids["node1"] {
		t.Errorf("node1 is member %x, was %x", after["node1"], ids["node1"])
	}
	for _, name := range c.AllNames() {
		expectKeys(t, c, name, "/k", 30)
	}
}
