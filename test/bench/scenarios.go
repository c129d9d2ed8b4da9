package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// converge bounds every wait of the bench; a wait that runs out fails the
// scenario (the bench then exits 1).
const converge = 3 * time.Minute

// pollEvery is how often a wait starts an observation of the cluster: the
// resolution of every timing in the table. The observations overlap
// (testbed.AwaitOverlapping), so one that waits on a member that does not
// answer yet does not hold the next ones back.
const pollEvery = 50 * time.Millisecond

// scriptRetry is the scripted repair's own pause between attempts, as in
// an operator's `until etcdctl member promote ...; do sleep 0.1; done`.
const scriptRetry = 100 * time.Millisecond

// event is one timed occurrence: how long it took, what the writer saw.
type event struct {
	D time.Duration
	W writes
	// Took is the agent's own "took" of a repair, from its log.
	Took time.Duration
	// Stalled: a member that joined during the event hit etcd's publish
	// stall (see stalls).
	Stalled bool
	// Steps are the marks of an agent's repair in its log (repairSteps).
	Steps map[string]time.Duration
	// Averted is how many times an agent restarted a member's etcd that
	// had lost the publish race (see averted) during the event.
	Averted int
	// SnapshotPath is the safety snapshot an agent's repair kept, from
	// its log; Reused: a scheduled snapshot stood for it.
	SnapshotPath string
	Reused       bool
}

// stalls counts, in every log of the cluster (the agents' and the plain
// etcd's), etcd's "failed to publish local member to cluster through
// raft ... request timed out": a joining member whose first publish was
// lost serves no client until its 7 s publish timeout runs out and it
// tries again. It strikes
// agents and scripts alike, at random; the table reports it.
func stalls(c *testbed.Cluster) int {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	n := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(b), "\n") {
			// etcd logs the same line with "server stopped" when it is
			// stopped before it published: not a stall.
			if strings.Contains(line, "failed to publish local member to cluster through raft") && strings.Contains(line, "timed out") {
				n++
			}
		}
	}
	return n
}

func must(r testbed.TB, err error) {
	if err != nil {
		r.Fatalf("%v", err)
	}
}

// wait observes the cluster through cli (the test bed's observer, the same
// for the agents' clusters and the plain ones, so that both are timed to
// the same end) until ok says "", and returns the time that observation
// ended and the observation.
func wait(r testbed.TB, cli *clientv3.Client, what string, ok func(testbed.Observation) string) (time.Time, testbed.Observation) {
	o, err := testbed.AwaitOverlapping(cli, converge, pollEvery, ok)
	if err != nil {
		r.Fatalf("%s: %v", what, err)
	}
	return o.End, o
}

// healthy: the members are exactly names, all healthy voters.
func healthy(names ...string) func(testbed.Observation) string {
	return func(o testbed.Observation) string {
		_, why := o.ExactVoters(names...)
		return why
	}
}

// newCluster is testbed.New whose agents are killed (SIGKILL, their etcd
// with them) when the scenario ends: a graceful etcd stop waits up to 7 s
// for clients' open streams, and a finished scenario has nothing to save.
func newCluster(r testbed.TB, n int) *testbed.Cluster {
	c := testbed.New(r, n)
	r.Cleanup(func() { killAll(c) })
	return c
}

func killAll(c *testbed.Cluster) {
	for _, m := range c.Members {
		if c.AgentRunning(m.Name) {
			c.Kill9(m.Name)
		}
	}
}

func startAll(c *testbed.Cluster, names ...string) {
	for _, n := range names {
		c.Start(n)
	}
}

// ensureNotLeader moves leadership off member name, so that every timed
// event starts the same way: a follower goes down, no election.
func ensureNotLeader(r testbed.TB, c *testbed.Cluster, name string, members ...string) {
	cli := c.Client(members...)
	_, o := wait(r, cli, "a leader", func(o testbed.Observation) string {
		if o.Leader() == 0 {
			return "no leader"
		}
		return ""
	})
	id := o.ID(name)
	if o.Leader() != id {
		return
	}
	var to uint64
	for _, m := range o.Members {
		if m.ID != id && m.HealthyVoter() {
			to = m.ID
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Client(name).MoveLeader(ctx, to)
	must(r, err)
	wait(r, cli, "leader moved off "+name, func(o testbed.Observation) string {
		if l := o.Leader(); l == 0 || l == id {
			return "leader still " + name
		}
		return ""
	})
}

// bootstrap times three agents forming a cluster from nothing, and three
// plain etcd processes started with a static --initial-cluster.
func bootstrapAgents(r testbed.TB) (*testbed.Cluster, event) {
	c := newCluster(r, 3)
	s0 := stalls(c)
	t0 := time.Now()
	startAll(c, c.AllNames()...)
	end, _ := wait(r, c.Client(), "agents bootstrap 3 members", healthy(c.AllNames()...))
	return c, event{Stalled: stalls(c) > s0, D: end.Sub(t0)}
}

func bootstrapPlain(r testbed.TB) event {
	c := newCluster(r, 3)
	ic := staticInitialCluster(c)
	var procs []*testbed.Process
	defer func() {
		for _, p := range procs {
			stopPlain(p)
		}
	}()
	s0 := stalls(c)
	t0 := time.Now()
	for _, m := range c.Members {
		p, err := startPlain(c, m, "new", ic)
		must(r, err)
		procs = append(procs, p)
	}
	end, _ := wait(r, c.Client(), "plain etcd bootstraps 3 members", healthy(c.AllNames()...))
	return event{Stalled: stalls(c) > s0, D: end.Sub(t0)}
}

// killEtcd kills member name's etcd with SIGKILL and times until it is a
// healthy voter again: same member ID, a new etcd process.
func killEtcd(r testbed.TB, c *testbed.Cluster, w *writer, name string) event {
	ensureNotLeader(r, c, name)
	_, o := wait(r, c.Client(), "healthy before the kill", healthy(c.AllNames()...))
	id := o.ID(name)
	pid := c.EtcdPID(name)
	s0 := stalls(c)
	t0 := time.Now()
	must(r, syscall.Kill(pid, syscall.SIGKILL))
	end, _ := wait(r, c.Client(), name+" healthy again after kill -9", func(o testbed.Observation) string {
		if p := c.EtcdPID(name); p == pid || !testbed.Alive(p) {
			return "no new etcd yet"
		}
		if o.ID(name) != id {
			return "member ID changed"
		}
		_, why := o.ExactVoters(c.AllNames()...)
		return why
	})
	return event{Stalled: stalls(c) > s0, D: end.Sub(t0), W: w.window(t0, end)}
}

// load writes about total bytes of values in keys of valueSize bytes,
// through 8 concurrent clients.
func load(r testbed.TB, cli *clientv3.Client, total int64, valueSize int) {
	n := int(total / int64(valueSize))
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := make([]byte, valueSize)
			for i := range val {
				val[i] = byte('a' + rand.IntN(26))
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				copy(val, fmt.Sprintf("%08d", i))
				var err error
				for try := 0; try < 5; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err = cli.Put(ctx, fmt.Sprintf("/bench/data/%08d", i), string(val))
					cancel()
					if err == nil {
						break
					}
				}
				if err != nil {
					failed.Store(err.Error())
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := failed.Load(); v != nil {
		r.Fatalf("loading data: %v", v)
	}
}

// steady lets the cluster settle before a timed membership event, so that
// each starts from a steady cluster: etcd refuses member adds and removes
// ("unhealthy cluster") until its leader has been connected to every voter
// for 5 s (a member just promoted counts), and it derives a new member's ID from its peer URLs and the Unix time in
// seconds, so re-adding a peer URL within the second it was added yields
// the removed ID, which etcd refuses ("member not found").
func steady() { time.Sleep(6 * time.Second) }

const repairSpec = "repair:\n  maxPerHour: 100\n"

// agentRepair stops member name's agent (and with it etcd), corrupts its
// WAL, starts the agent and times until the member is a healthy voter
// again under a new member ID.
// members are the cluster's members (all of the test bed's by default).
func agentRepair(r testbed.TB, c *testbed.Cluster, w *writer, name string, members ...string) event {
	if len(members) == 0 {
		members = c.AllNames()
	}
	steady()
	ensureNotLeader(r, c, name, members...)
	_, o := wait(r, c.Client(members...), "healthy before the repair", healthy(members...))
	old := o.ID(name)
	must(r, c.Stop(name))
	c.CorruptWAL(name)
	s0, a0 := stalls(c), averted(c)
	t0 := time.Now()
	c.Start(name)
	end, _ := wait(r, c.Client(members...), name+" repaired by its agent", func(o testbed.Observation) string {
		if o.ID(name) == old {
			return "old member still listed"
		}
		_, why := o.ExactVoters(members...)
		return why
	})
	ev := event{Stalled: stalls(c) > s0, Averted: averted(c) - a0, D: end.Sub(t0), W: w.window(t0, end), Took: lastTook(c.LogPath(name)),
		Steps: repairSteps(c.LogPath(name))}
	ev.SnapshotPath, ev.Reused = lastSnapshotStep(c.LogPath(name))
	return ev
}

// scriptedRepair does the same with the operator's procedure and no agent
// for the member; afterwards its agent takes the repaired member over.
func scriptedRepair(r testbed.TB, c *testbed.Cluster, w *writer, name string, n int) event {
	steady()
	ensureNotLeader(r, c, name)
	_, o := wait(r, c.Client(), "healthy before the repair", healthy(c.AllNames()...))
	old := o.ID(name)
	var others []string
	for _, x := range c.AllNames() {
		if x != name {
			others = append(others, x)
		}
	}
	changes := membershipChanges(c, others)
	must(r, c.Stop(name))
	c.CorruptWAL(name)
	s0 := stalls(c)
	t0 := time.Now()
	marks := &scriptMarks{t0: t0, m: map[string]time.Duration{}, stop: func() {}}
	p, newID, err := manualRepair(c, c.Client(others...), c.Member(name), old, fmt.Sprintf("%s.manual-%d", c.DataDir(name), n), marks)
	must(r, err)
	end, _ := wait(r, c.Client(), name+" repaired by the script", func(o testbed.Observation) string {
		if o.ID(name) != newID {
			return "new member not listed yet"
		}
		_, why := o.ExactVoters(c.AllNames()...)
		return why
	})
	marks.stop()
	ev := event{Stalled: stalls(c) > s0, D: end.Sub(t0), W: w.window(t0, end), Steps: marks.get()}
	if now := membershipChanges(c, others); now != changes {
		r.Errorf("the other agents made %d membership changes during the scripted repair", now-changes)
	}
	stopPlain(p)
	c.Start(name)
	wait(r, c.Client(), name+"'s agent takes over the repaired member", func(o testbed.Observation) string {
		if o.ID(name) != newID {
			return "member ID changed"
		}
		_, why := o.ExactVoters(c.AllNames()...)
		return why
	})
	return ev
}

func membershipChanges(c *testbed.Cluster, names []string) int {
	n := 0
	for _, name := range names {
		b, _ := os.ReadFile(c.LogPath(name))
		n += strings.Count(string(b), `"msg":"membership change"`)
	}
	return n
}

// lastTook is the "took" of the agent's last finished rejoin since its
// last start, 0 when none finished yet. Only the line whose message it is:
// the agent's "decision" line that follows quotes it without a took.
func lastTook(logPath string) time.Duration {
	b, _ := os.ReadFile(logPath)
	var took time.Duration
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"msg":"agent starting"`) {
			took = 0
		}
		if !strings.Contains(line, `"msg":"rejoin finished`) {
			continue
		}
		// zap writes durations as seconds.
		var rec struct {
			Took float64 `json:"took"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			took = time.Duration(rec.Took * float64(time.Second))
		}
	}
	return took
}

// scaleUp edits the spec from 3 to 5 members and starts the two new
// hosts' agents; scaleDown edits it back. Both are timed from the edit.
func scaleUp(r testbed.TB, c *testbed.Cluster, w *writer) event {
	steady()
	s0, a0 := stalls(c), averted(c)
	t0 := time.Now()
	c.WriteSpec()
	c.Start("node4")
	c.Start("node5")
	end, _ := wait(r, c.Client(), "3→5", healthy(c.AllNames()...))
	return event{Stalled: stalls(c) > s0, Averted: averted(c) - a0, D: end.Sub(t0), W: w.window(t0, end)}
}

func scaleDown(r testbed.TB, c *testbed.Cluster, w *writer, three []string, n int) event {
	steady()
	s0 := stalls(c)
	t0 := time.Now()
	c.WriteSpec(three...)
	end, _ := wait(r, c.Client(three...), "5→3", healthy(three...))
	ev := event{Stalled: stalls(c) > s0, D: end.Sub(t0), W: w.window(t0, end)}
	// The removed hosts' agents go idle with their data moved aside; the
	// operator then stops them, and the next run starts them afresh.
	for _, x := range []string{"node4", "node5"} {
		testbed.Eventually(r, time.Minute, x+" goes idle", func() string {
			if len(c.Backups(x)) < n+1 || testbed.Alive(c.EtcdPID(x)) {
				return "not idle yet"
			}
			return ""
		})
		must(r, c.Stop(x))
	}
	return ev
}

// idle measures the agents' own CPU and RSS (not their etcd's) while the
// cluster has nothing to do.
func idle(r testbed.TB, c *testbed.Cluster, d time.Duration) (cpu []float64, rss []int64) {
	var pids []int
	for _, n := range c.AllNames() {
		pids = append(pids, c.AgentPID(n))
	}
	cpu, rss, err := idleUsage(pids, d)
	must(r, err)
	return cpu, rss
}

// setInterval rewrites agent.interval in the spec in place of the test
// bed's 500ms; the agents pick the edit up by themselves.
func setInterval(r testbed.TB, c *testbed.Cluster, interval string) {
	b, err := os.ReadFile(c.Spec)
	must(r, err)
	s := strings.Replace(string(b), "interval: 500ms", "interval: "+interval, 1)
	must(r, atomicfile.WriteFile(c.Spec, []byte(s), 0o644))
}
