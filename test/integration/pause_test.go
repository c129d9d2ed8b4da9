package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// pauseKey is where `etcdkeeper pause` keeps the pause (read here as
// etcd's own client sees it, not through the agent's code).
const pauseKey = "/etcdkeeper/itest/pause"

// etcdkeeper runs the CLI and returns what it printed.
func etcdkeeper(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testbed.Binary, args...).CombinedOutput()
	t.Logf("etcdkeeper %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("etcdkeeper %s: %v", args[0], err)
	}
	return string(out)
}

// logCount is how many lines of name's log hold every part.
func logCount(c *testbed.Cluster, name string, parts ...string) int {
	b, _ := os.ReadFile(c.LogPath(name))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}

// logLine is the first line of name's log that holds every part ("":
// none).
func logLine(c *testbed.Cluster, name string, parts ...string) string {
	b, _ := os.ReadFile(c.LogPath(name))
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return line
		}
	}
	return ""
}

// awaitPaused waits until each agent logged the pause (count times in all).
func awaitPaused(t *testing.T, c *testbed.Cluster, count int, names ...string) {
	t.Helper()
	for _, n := range names {
		testbed.Eventually(t, converge, n+"'s agent sees the pause", func() string {
			if got := logCount(c, n, `"msg":"paused"`); got < count {
				return fmt.Sprintf("logged the pause %d times, want %d", got, count)
			}
			return ""
		})
	}
}

// memberIDs lists the members by name, as etcd itself lists them.
func memberIDs(t *testing.T, c *testbed.Cluster, from string) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client(from).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, m := range resp.Members {
		out[m.Name] = m.ID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want map[string]uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: members %v, want %v", what, got, want)
	}
	for n, id := range want {
		if got[n] != id {
			t.Fatalf("%s: member %s has ID %x, want %x (unchanged)", what, n, got[n], id)
		}
	}
}

// TestPauseHoldsRepair: a member whose WAL is corrupt is not repaired
// while the cluster is paused — its data stays where it is, its member in
// the list — and its agent says what it would do; after resume it is
// repaired as usual.
func TestPauseHoldsRepair(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/before", 20)
	out := etcdkeeper(t, "pause", "--config", c.Spec, "--reason", "replacing a disk")
	if !strings.Contains(out, " until etcdkeeper resume: replacing a disk") {
		t.Fatalf("pause printed %q", out)
	}

	if err := c.Stop("node2"); err != nil {
		t.Fatal(err)
	}
	c.CorruptWAL("node2")
	c.Start("node2")
	testbed.Eventually(t, converge, "node2 says it holds back the repair", func() string {
		line := logLine(c, "node2", `"decision"`, "paused by ", "until etcdkeeper resume: replacing a disk; would now: ", "rejoin")
		if line == "" {
			return "not yet"
		}
		t.Logf("node2: %s", line)
		return ""
	})
	c.WaitPasses(converge, 5, "node2")
	if b := c.Backups("node2"); len(b) != 0 {
		t.Fatalf("node2's data was moved aside while paused: %v", b)
	}
	if c.LogContains("node2", "rejoin started") {
		t.Fatalf("node2 started a rejoin while paused")
	}
	sameIDs(t, "while paused", memberIDs(t, c, "node1"), ids)
	if plan := etcdkeeperStatus(t, "plan", "--config", c.Spec); !strings.Contains(plan, "paused by ") || !strings.Contains(plan, "would now (after resume): ") {
		t.Errorf("plan while paused does not say so:\n%s", plan)
	}

	if out := etcdkeeper(t, "resume", "--config", c.Spec); !strings.Contains(out, "resumed: ended the pause by ") {
		t.Fatalf("resume printed %q", out)
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node2"] == ids["node2"] {
		t.Fatalf("node2 kept member ID %x after resume; the repair must rejoin it as a new member", ids["node2"])
	}
	if b := c.Backups("node2"); len(b) != 1 {
		t.Fatalf("backups of node2 after resume = %v, want one", b)
	}
	expectKeys(t, c, "node2", "/before", 20)
	testbed.Eventually(t, converge, "history lists node2's pause, its end, then its repair", func() string {
		mine, why := historyOf(t, c, "node2")
		if why != "" {
			return why
		}
		evs, why := inOrder(mine, "paused", "pause-over", "remove", "add-learner", "promote", "repair-done")
		if why != "" {
			return why
		}
		if p := evs["paused"]; p.Reason != "replacing a disk" || p.Detail["by"] == "" {
			return fmt.Sprintf("paused: %+v, want the reason and who took it", p)
		}
		return ""
	})
}

// etcdkeeperStatus runs a command whose exit status says something (2:
// changes pending) and returns its output.
func etcdkeeperStatus(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, testbed.Binary, args...).CombinedOutput()
	t.Logf("etcdkeeper %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestPauseHoldsSpecEdit: an agent killed with SIGKILL and started again
// while paused stays paused (it starts its own member as it is); a spec
// edit that removes a member is not applied while paused, and is after
// resume.
func TestPauseHoldsSpecEdit(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, "")
	etcdkeeper(t, "pause", "--config", c.Spec)
	awaitPaused(t, c, 1, c.AllNames()...)

	pid := c.EtcdPID("node1")
	c.Kill9("node1")
	testbed.Eventually(t, converge, "etcd of the killed agent exits", func() string {
		if testbed.Alive(pid) {
			return fmt.Sprintf("etcd pid %d still running", pid)
		}
		return ""
	})
	c.Start("node1")
	awaitPaused(t, c, 2, "node1")
	sameIDs(t, "node1 restarted while paused", c.WaitVoters(converge, c.AllNames()...), ids)

	c.WriteSpec("node1", "node2")
	testbed.Eventually(t, converge, "an agent says it holds back the removal of node3", func() string {
		for _, n := range []string{"node1", "node2"} {
			if line := logLine(c, n, `"decision"`, "paused by ", "would now: ", "remov", "node3"); line != "" {
				t.Logf("%s: %s", n, line)
				return ""
			}
		}
		return "not yet"
	})
	c.WaitPasses(converge, 5, "node1", "node2")
	sameIDs(t, "spec edit while paused", memberIDs(t, c, "node1"), ids)

	etcdkeeper(t, "resume", "--config", c.Spec)
	c.WaitVoters(converge, "node1", "node2")
	if got := memberIDs(t, c, "node1"); len(got) != 2 {
		t.Fatalf("members after resume: %v, want node3 removed", got)
	}
}

// TestPauseForEndsByItself: a pause --for 10s ends without resume: its
// key goes, and the spec edit it held (removing node3) is applied — never
// before the pause's end. (10 s, not 3: the test reads the pause's key
// after the command has exited, and the key's lease must not have run
// out by then on a loaded machine.)
func TestPauseForEndsByItself(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, "")
	etcdkeeper(t, "pause", "--config", c.Spec, "--for", "10s", "--reason", "a quick look")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client().Get(ctx, pauseKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the pause key: %v, %v", resp, err)
	}
	var p struct{ Until time.Time }
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil || p.Until.IsZero() {
		t.Fatalf("the pause %s: %v, until %v", resp.Kvs[0].Value, err, p.Until)
	}
	c.WriteSpec("node1", "node2")

	c.WaitVoters(converge, "node1", "node2")
	for _, n := range []string{"node1", "node2"} {
		for _, at := range logTimes(t, c, n, "changed membership: remove") {
			if at.Before(p.Until) {
				t.Errorf("%s removed a member at %s, before the pause's end %s", n, at, p.Until)
			}
		}
	}
	for _, n := range c.AllNames() {
		t.Logf("%s logged the pause %d times, its end %d times", n, logCount(c, n, `"msg":"paused"`), logCount(c, n, "pause over"))
	}
	testbed.Eventually(t, converge, "the pause's key goes by itself", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Client("node1").Get(ctx, pauseKey, clientv3.WithCountOnly())
		switch {
		case err != nil:
			return err.Error()
		case resp.Count != 0:
			return "still there"
		}
		return ""
	})
}

// logTimes are the times of name's log lines that hold part.
func logTimes(t *testing.T, c *testbed.Cluster, name, part string) []time.Time {
	t.Helper()
	b, _ := os.ReadFile(c.LogPath(name))
	var out []time.Time
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, part) {
			continue
		}
		var l struct{ TS string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
		if err != nil {
			t.Fatalf("log line time %q: %v", l.TS, err)
		}
		out = append(out, at)
	}
	return out
}

// etcdkeeperExit runs the CLI and returns what it printed and its exit
// status.
func etcdkeeperExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testbed.Binary, args...).CombinedOutput()
	t.Logf("etcdkeeper %s:\n%s", strings.Join(args, " "), out)
	code := 0
	if e, ok := errors.AsType[*exec.ExitError](err); ok {
		code = e.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestPauseWithoutQuorum: with two of three agents down the cluster
// cannot hold a pause; pause writes it to the agent it reaches (node1,
// through its control socket), names the two it missed and exits 2. The
// pause survives node1's agent being killed and started again, and the
// quorum coming back; resume ends it.
func TestPauseWithoutQuorum(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, "")
	for _, n := range []string{"node2", "node3"} {
		if err := c.Stop(n); err != nil {
			t.Fatal(err)
		}
	}
	out, code := etcdkeeperExit(t, "pause", "--config", c.Spec, "--reason", "quorum lost")
	if code != 2 || !strings.Contains(out, "the cluster could not take the pause") || !strings.Contains(out, ": quorum lost, on the agents of node1: ") ||
		!strings.Contains(out, "not paused (not reached): node2 (") || !strings.Contains(out, "; node3 (") {
		t.Fatalf("pause without quorum: exit %d, want 2 and the agents reached and missed", code)
	}
	awaitLocal := func(what string, count int) {
		t.Helper()
		testbed.Eventually(t, converge, what, func() string {
			if n := logCount(c, "node1", `"decision"`, `"paused on this host by `, "quorum lost; "); n < count {
				return fmt.Sprintf("%d paused decisions, want %d", n, count)
			}
			return ""
		})
	}
	awaitLocal("node1 holds the local pause", 1)
	before := logCount(c, "node1", `"decision"`, `"paused on this host by `)

	c.Kill9("node1")
	c.Start("node1")
	c.Start("node2")
	c.Start("node3")
	c.WaitVoters(converge, c.AllNames()...)
	awaitLocal("node1 holds the local pause after its restart, with the quorum back", before+1)

	out, code = etcdkeeperExit(t, "resume", "--config", c.Spec)
	if code != 0 || !strings.Contains(out, "resumed node1: ended its local pause by ") {
		t.Fatalf("resume: exit %d, want 0 and node1's local pause ended", code)
	}
	testbed.Eventually(t, converge, "node1 acts again", func() string {
		if !c.LogContains("node1", "resumed on this host", `"local-pause-ended":true`) || !c.LogContains("node1", "pause over: the agent acts again") {
			return "not yet"
		}
		return ""
	})
}

// TestResumeWithoutQuorum: a pause the cluster holds cannot be deleted
// once the quorum is lost; resume then reaches node1's agent, which drops
// it (it would otherwise hold up a recovery), and exits 1. With the
// quorum back node1 does not take the pause up again (the delete resume
// proposed may or may not have been committed meanwhile: either way), and
// a resume then leaves no pause.
func TestResumeWithoutQuorum(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, "")
	etcdkeeper(t, "pause", "--config", c.Spec, "--reason", "before the outage")
	awaitPaused(t, c, 1, "node1")
	for _, n := range []string{"node2", "node3"} {
		if err := c.Stop(n); err != nil {
			t.Fatal(err)
		}
	}
	out, code := etcdkeeperExit(t, "resume", "--config", c.Spec)
	if code != 1 || !strings.Contains(out, "the cluster's pause could not be removed") ||
		!strings.Contains(out, "resumed on the agents of node1: ") || !strings.Contains(out, "agents not reached") {
		t.Fatalf("resume without quorum: exit %d, want 1, the cluster's pause left and the agents missed named", code)
	}
	testbed.Eventually(t, converge, "node1 drops the pause", func() string {
		if !c.LogContains("node1", "pause over: the agent acts again") {
			return "not yet"
		}
		return ""
	})

	c.Start("node2")
	c.Start("node3")
	c.WaitVoters(converge, c.AllNames()...)
	c.WaitPasses(converge, 3, c.AllNames()...)
	if n := logCount(c, "node1", `"msg":"paused"`); n != 1 {
		t.Errorf("node1 took up the pause it was resumed from again (%d paused lines, want 1)", n)
	}
	etcdkeeper(t, "resume", "--config", c.Spec)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := c.Client("node1").Get(ctx, pauseKey, clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("the pause key after resume with the quorum back: %v, %v", resp, err)
	}
}
