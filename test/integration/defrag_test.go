package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// defragSpec: a threshold the test's 30 MB reach.
const defragSpec = "maintenance:\n  defrag:\n    minFreeRatio: 0.5\n    minFreeBytes: 1MiB\n"

// onlineSpec is defragSpec with the online way only (offline: false):
// the lock holder defragments each member over its client URL.
const onlineSpec = defragSpec + "    offline: false\n"

// fragment writes about mb MB of values and deletes them again,
// compacted: the members' db files keep their size, with most of it free.
func fragment(t *testing.T, c *testbed.Cluster, mb int) {
	t.Helper()
	cli := c.Client()
	value := strings.Repeat("x", 100<<10)
	for i := range mb * 10 {
		testbed.Put(t, cli, fmt.Sprintf("bulk/%05d", i), value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del, err := cli.Delete(ctx, "bulk/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// bbolt frees the compacted pages at a later commit, once no read
	// that began before them is open (a loaded host's status, a
	// snapshot); a commit comes with a write: a few, spaced over batch
	// intervals, so that the free space shows in every member's status.
	for i := range 3 {
		time.Sleep(150 * time.Millisecond)
		testbed.Put(t, cli, "fragment/settle", fmt.Sprint(i))
	}
}

// logEvent is one line of an agent's JSON log.
type logEvent struct {
	At     time.Time
	Msg    string
	Kind   string
	Target string // the member defragmented, or whose leadership moved
	Agent  string
}

// agentEvents reads the lines of name's log whose message is one of msgs.
func agentEvents(t *testing.T, c *testbed.Cluster, name string, msgs ...string) []logEvent {
	t.Helper()
	f, err := os.Open(c.LogPath(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			TS     string `json:"ts"`
			Msg    string `json:"msg"`
			Kind   string `json:"kind"`
			Target string `json:"target"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		for _, m := range msgs {
			if l.Msg == m {
				at, _ := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
				out = append(out, logEvent{At: at, Msg: l.Msg, Kind: l.Kind, Target: l.Target, Agent: name})
			}
		}
	}
	return out
}

// notShrunk says which member's db file is not yet half its size before
// (sizes), "" when every member's is. A member that did not answer its
// status (DBSize 0: busy defragmenting on a loaded machine) has not shown
// that it shrank.
func notShrunk(o testbed.Observation, sizes map[string]int64) string {
	if o.Err != nil {
		return o.Err.Error()
	}
	for _, m := range o.Voters() {
		switch {
		case !m.AsItself:
			return fmt.Sprintf("%s: no answer: %s", m.Name, m.NoAnswer)
		case m.DBSize > sizes[m.Name]/2:
			return fmt.Sprintf("%s: %d bytes, was %d", m.Name, m.DBSize, sizes[m.Name])
		}
	}
	return ""
}

// allAnswered observes the cluster until every member is a healthy voter
// that answered its status: its db size is then its own, not the 0 of a
// member too busy to answer within the observer's second.
func allAnswered(t *testing.T, c *testbed.Cluster) testbed.Observation {
	t.Helper()
	o, err := testbed.Await(c.Client(), converge, 300*time.Millisecond, func(o testbed.Observation) string {
		_, why := o.ExactVoters(c.AllNames()...)
		return why
	})
	if err != nil {
		t.Fatalf("observing every member's db size: %v", err)
	}
	return o
}

// answered is the first observation through cli whose member list and
// alarm list were answered: a single Observe may not be (each call has a
// second, and on a loaded machine one of them, or a call sent to a member
// that has just restarted, may take longer), and its empty member and
// alarm lists would read as no member IDs, no leader and no alarm.
func answered(t *testing.T, cli *clientv3.Client) testbed.Observation {
	t.Helper()
	o, err := testbed.Await(cli, converge, 300*time.Millisecond, testbed.Answered)
	if err != nil {
		t.Fatalf("observing the cluster: %v", err)
	}
	return o
}

// leaderNow is the leader the first observation through cli in which the
// members that answered agree on one names (see answered).
func leaderNow(t *testing.T, cli *clientv3.Client) uint64 {
	t.Helper()
	o, err := testbed.Await(cli, converge, 300*time.Millisecond, func(o testbed.Observation) string {
		if o.Leader() == 0 {
			return "no leader the answering members agree on"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("observing the leader: %v", err)
	}
	return o.Leader()
}

// TestDefragOneAtATime: three members with 30 MB written and deleted
// again, defragmented online. The agents defragment every member, one at a time (the cluster
// lock), followers first; the leader only after its leadership moved to
// another member. Each db file shrinks, the member IDs stay, and a writer
// through every member sees no failed write.
func TestDefragOneAtATime(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	// Off until the data is there: the test knows which member leads
	// when the defragmentations start.
	c.Extra = onlineSpec + "    enabled: false\n"
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	fragment(t, c, 30)
	before := allAnswered(t, c)
	leader, _ := before.ByID(before.Leader())
	sizes := map[string]int64{}
	for _, m := range before.Voters() {
		sizes[m.Name] = m.DBSize
		if m.DBSize < 20<<20 {
			t.Fatalf("%s's db is %d bytes after 30 MB were written", m.Name, m.DBSize)
		}
	}
	t.Logf("leader %s; db sizes %v", leader.Name, sizes)

	w := c.StartWriter("steady", 3*time.Second, c.AllNames()...)
	c.Extra = onlineSpec
	c.WriteSpec()
	testbed.Eventually(t, 3*converge, "every member's db file shrinks", func() string {
		return notShrunk(testbed.Observe(c.Client()), sizes)
	})
	w.Stop()
	if n := w.Failed.Load(); n > 0 {
		t.Errorf("%d writes failed during the defragmentations (last: %v); %d succeeded", n, w.LastErr.Load(), w.OK.Load())
	}
	t.Logf("writer: %d writes, %d failed", w.OK.Load(), w.Failed.Load())

	// The agent logs "defragmented" once the call returned: the observer
	// can see the smaller db file a moment before the line is there.
	var events []logEvent
	testbed.Eventually(t, converge, "the agents log the three defragmentations done", func() string {
		events = nil
		for _, n := range c.AllNames() {
			events = append(events, agentEvents(t, c, n, "defragmenting", "defragmented", "membership change")...)
		}
		logged := map[string]bool{}
		for _, e := range events {
			if e.Msg == "defragmented" {
				logged[e.Target] = true
			}
		}
		if len(logged) != 3 {
			return fmt.Sprintf("defragmented: %v", logged)
		}
		return ""
	})
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	done, running := map[string]bool{}, ""
	moved := false
	for _, e := range events {
		t.Logf("%s agent %s: %s %s %s", e.At.Format("15:04:05.000"), e.Agent, e.Msg, e.Kind, e.Target)
		switch e.Msg {
		case "defragmenting":
			if running != "" {
				t.Errorf("%s's defragmentation started while %s's ran", e.Target, running)
			}
			if e.Target == leader.Name && !moved {
				t.Errorf("the leader %s was defragmented before its leadership moved", e.Target)
			}
			if e.Target == leader.Name && len(done) < 2 {
				t.Errorf("the leader %s was defragmented before the followers (done: %v)", e.Target, done)
			}
			running = e.Target
		case "defragmented":
			running = ""
			done[e.Target] = true
		case "membership change":
			if e.Kind == "move-leader" && e.Target == leader.Name {
				moved = true
			}
		}
	}
	if len(done) != 3 {
		t.Errorf("defragmented: %v, want all three", done)
	}
	testbed.Eventually(t, converge, "history lists the three defragmentations, the leader's after its move", func() string {
		evs, why := historyOf(t, c, "")
		if why != "" {
			return why
		}
		defragged, moved := map[string]bool{}, false
		for _, e := range evs {
			switch {
			case e.Kind == "move-leader" && e.Member == leader.Name:
				moved = true
			case e.Kind == "defrag" && e.MemberID == fmt.Sprintf("%x", ids[e.Member]) && e.Detail["before"] != "" && e.Detail["after"] != "":
				if e.Member == leader.Name && !moved {
					return "the leader's defrag is listed before its leadership moved"
				}
				defragged[e.Member] = true
			}
		}
		if len(defragged) != 3 {
			return fmt.Sprintf("defrag events for %v in %+v", defragged, evs)
		}
		return ""
	})
	after := allAnswered(t, c)
	for name, id := range ids {
		if after.ID(name) != id {
			t.Errorf("%s's member ID changed: %x -> %x", name, id, after.ID(name))
		}
	}
}

// TestDefragAfterAgentCrash: the agent that defragments exits hard with
// the call under way (a test crash point, as kill -9 would). Nothing is
// left half-done: etcd's defragmentation replaces a member's db file
// only when complete, and the restarted agents observe and decide again,
// so every member ends defragmented, under its own member ID.
func TestDefragAfterAgentCrash(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.Extra = onlineSpec + "    enabled: false\n"
	c.WriteSpec()
	for _, m := range c.Members {
		c.Start(m.Name, "ETCDKEEPER_TEST_CRASH_AT=defrag")
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	fragment(t, c, 20)
	sizes := map[string]int64{}
	for _, m := range allAnswered(t, c).Voters() {
		sizes[m.Name] = m.DBSize
	}
	c.Extra = onlineSpec
	c.WriteSpec()
	crashed := map[string]bool{}
	testbed.Eventually(t, 4*converge, "every member's db file shrinks, crashed agents restarted", func() string {
		restartCrashed(c, crashed)
		return notShrunk(testbed.Observe(c.Client()), sizes)
	})
	if len(crashed) == 0 {
		t.Fatal("no agent reached the crash point")
	}
	t.Logf("crashed mid-defragmentation: %v", crashed)
	// The agents that did not crash still carry the crash point: one that
	// defragments again later would exit with nobody to start it again.
	// Restart them without it (a graceful stop) before the final check.
	restartWithoutCrashPoint(t, c, crashed)
	after := c.WaitVoters(converge, c.AllNames()...)
	checkNoDefragTemps(t, c)
	for name, id := range ids {
		if after[name] != id {
			t.Errorf("%s's member ID changed: %x -> %x", name, id, after[name])
		}
	}
}

// TestDefragAndLeaderMoveCommands: with the agents' policy off,
// `etcdkeeper defrag` without --yes prints the step and changes nothing;
// `leader move --to` hands leadership over; `defrag --member NAME --yes`
// defragments that member (the leader: moved off first) beside running
// agents, under the cluster lock.
func TestDefragAndLeaderMoveCommands(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.Extra = defragSpec + "    enabled: false\n"
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	fragment(t, c, 10)
	before := allAnswered(t, c)

	// The first step: a follower's defragmentation (offline by its own
	// agent, or online when the command did not read its record), or,
	// when only the leader is due (the followers' free share can fall
	// short of the threshold), the leader's hand-off; it may wait a
	// moment to see a member caught up.
	testbed.Eventually(t, converge, "the dry run names the procedure's first step", func() string {
		out, code := etcdkeeperExit(t, "defrag", "--config", c.Spec)
		t.Logf("defrag (dry run), exit %d:\n%s", code, out)
		first := strings.Contains(out, "next: defrag") || strings.Contains(out, "next: move-leader from node")
		if code != 2 || !first || !strings.Contains(out, "dry run: nothing changed") {
			return fmt.Sprintf("exit %d: %s", code, out)
		}
		return ""
	})
	// An operator's pause holds the commands too, as it holds the agents
	// (and recover): a second operator's work is not disturbed.
	if out, code := etcdkeeperExit(t, "pause", "--config", c.Spec, "--reason", "disk work"); code != 0 {
		t.Fatalf("pause: exit %d:\n%s", code, out)
	}
	var notLeader string
	leader := leaderNow(t, c.Client())
	for n, id := range ids {
		if id != leader {
			notLeader = n
		}
	}
	for _, args := range [][]string{{"defrag", "--config", c.Spec, "--yes"}, {"leader", "move", "--config", c.Spec, "--to", notLeader}} {
		if out, code := etcdkeeperExit(t, args...); code != 2 || !strings.Contains(out, "paused by") || !strings.Contains(out, "disk work") || !strings.Contains(out, "etcdkeeper resume") {
			t.Errorf("etcdkeeper %s while paused: exit %d:\n%s\nwant exit 2 naming the pause and resume", strings.Join(args, " "), code, out)
		}
	}
	if out, code := etcdkeeperExit(t, "resume", "--config", c.Spec); code != 0 {
		t.Fatalf("resume: exit %d:\n%s", code, out)
	}
	dry := allAnswered(t, c)
	for _, m := range dry.Voters() {
		if b, _ := before.ByName(m.Name); m.DBSize < b.DBSize {
			t.Errorf("the dry run (or a command while paused) changed %s's db: %d -> %d bytes", m.Name, b.DBSize, m.DBSize)
		}
	}

	var to string
	for _, m := range before.Voters() {
		if m.ID != before.Leader() {
			to = m.Name
		}
	}
	out, code := etcdkeeperExit(t, "leader", "move", "--config", c.Spec, "--to", to)
	t.Logf("leader move --to %s, exit %d:\n%s", to, code, out)
	if code != 0 || !strings.Contains(out, "changed membership: move-leader") || !strings.Contains(out, "done: "+to+" leads already") {
		t.Errorf("leader move: exit %d, output:\n%s", code, out)
	}
	if l := leaderNow(t, c.Client()); l != ids[to] {
		t.Errorf("leader is %x, want %s (%x)", l, to, ids[to])
	}
	out, code = etcdkeeperExit(t, "leader", "move", "--config", c.Spec, "--to", "node9")
	if code != 1 || !strings.Contains(out, "names no member of that name (its members: node1, node2, node3)") {
		t.Errorf("leader move to a member that is not there: exit %d, output:\n%s", code, out)
	}

	out, code = etcdkeeperExit(t, "defrag", "--config", c.Spec, "--member", to, "--yes")
	t.Logf("defrag --member %s --yes, exit %d:\n%s", to, code, out)
	if code != 0 || !strings.Contains(out, "changed membership: move-leader") || !strings.Contains(out, "defragmented "+to) || !strings.Contains(out, "done: "+to+" is defragmented") {
		t.Errorf("defrag --member: exit %d, output:\n%s", code, out)
	}
	after := allAnswered(t, c)
	m, _ := after.ByName(to)
	if b, _ := before.ByName(to); m.DBSize > b.DBSize/2 {
		t.Errorf("%s's db: %d -> %d bytes", to, b.DBSize, m.DBSize)
	}
	if after.Leader() == ids[to] {
		t.Errorf("%s still leads after its defragmentation: it should have handed leadership over first", to)
	}
	for name, id := range ids {
		if after.ID(name) != id {
			t.Errorf("%s's member ID changed", name)
		}
	}
}

// restartCrashed starts again, without the crash point, every agent that
// exited (at its crash point), and marks it in crashed.
func restartCrashed(c *testbed.Cluster, crashed map[string]bool) {
	for _, n := range c.AllNames() {
		if !c.AgentRunning(n) {
			_ = c.WaitExit(n, 10*time.Second)
			crashed[n] = true
			c.Start(n) // without the crash point
		}
	}
}

// restartWithoutCrashPoint restarts the agents that did not crash: they
// still carry the crash point, and one that reached it later would exit
// with nobody to start it again.
func restartWithoutCrashPoint(t *testing.T, c *testbed.Cluster, crashed map[string]bool) {
	t.Helper()
	for _, n := range c.AllNames() {
		if crashed[n] {
			continue
		}
		if c.AgentRunning(n) {
			if err := c.Stop(n); err != nil {
				t.Logf("stop %s: %v", n, err)
			}
		} else {
			_ = c.WaitExit(n, 10*time.Second)
		}
		c.Start(n)
	}
}

// checkNoDefragTemps: an etcd killed with its agent mid-defragmentation
// leaves its temporary file (member/snap/db.tmp.*); the agent removes it
// before it starts etcd again (etcdproc.RemoveDefragTemps).
func checkNoDefragTemps(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for _, n := range c.AllNames() {
		left, _ := filepath.Glob(filepath.Join(c.DataDir(n), "member", "snap", "db.tmp*"))
		if len(left) > 0 {
			t.Errorf("%s: a defragmentation's temporary file is left: %v", n, left)
		}
	}
}

// TestCommandsSayTheLockIsHeld: while someone else holds the cluster
// lock, `defrag --yes` and `leader move` (requests the agents carry out
// under the lock) wait, say that the lock is held, exit 2 (a step that
// waits, as documented) and change nothing.
func TestCommandsSayTheLockIsHeld(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, "")
	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	var mu *concurrency.Mutex
	testbed.Eventually(t, converge, "this test holds the cluster lock", func() string {
		s, err := concurrency.NewSession(c.Client(), concurrency.WithTTL(30))
		if err != nil {
			return err.Error()
		}
		m := concurrency.NewMutex(s, "/etcdkeeper/itest/lock")
		if err := m.TryLock(ctx); err != nil {
			_ = s.Close()
			return err.Error()
		}
		mu = m
		return ""
	})
	defer func() { _ = mu.Unlock(context.Background()) }()

	leader := leaderNow(t, c.Client())
	var to string
	for name, id := range ids {
		if id != leader {
			to = name
		}
	}
	for _, args := range [][]string{
		{"defrag", "--config", c.Spec, "--member", to, "--yes"},
		{"leader", "move", "--config", c.Spec, "--to", to},
	} {
		out, code := etcdkeeperExit(t, args...)
		if code != 2 || !strings.Contains(out, "another agent holds the cluster lock") {
			t.Errorf("etcdkeeper %s with the lock held elsewhere: exit %d, output %q; want exit 2 saying the lock is held",
				strings.Join(args, " "), code, out)
		}
	}
	if got := leaderNow(t, c.Client()); got != leader {
		t.Errorf("the leader moved from %x to %x while the lock was held elsewhere", leader, got)
	}
}
