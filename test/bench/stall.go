package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// etcd's publish stall (docs/etcd-publish-stall.md): a joining member
// whose first publish the leader applied before cutting the snapshot it
// sends waits out a 7 s request timeout before it serves. The agent
// restarts such a learner's etcd (agent.restartPublishStall, on by
// default). The stall scenario joins and repairs a member many times,
// alternating the mitigation on and off in the same run, and counts.

// restartedMsg is the agent's log line each time it restarts a stalled
// etcd.
const restartedMsg = "etcd lost the publish race: restarted it"

// averted counts the agent's restarts of a stalled etcd in the cluster's
// logs.
func averted(c *testbed.Cluster) int {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
	n := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		n += strings.Count(string(b), restartedMsg)
	}
	return n
}

// stallMode sets agent.restartPublishStall in the spec the next
// WriteSpec writes.
func stallMode(c *testbed.Cluster, on bool) {
	c.AgentExtra = ""
	if !on {
		c.AgentExtra = "  restartPublishStall: false\n"
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// stallRuns: joins (3→4 and back) and 1 MB repairs, each cfg.stallRuns
// times with the mitigation on and as many with it off, alternating.
func (b *bench) stallRuns() {
	joins := map[bool][]event{}
	repairs := map[bool][]event{}
	b.scenario("stall", func(r *testbed.Runner) {
		c := newCluster(r, 4)
		three := []string{"node1", "node2", "node3"}
		c.Extra = repairSpec
		c.WriteSpec(three...)
		startAll(c, three...)
		wait(r, c.Client(three...), "3 healthy voters", healthy(three...))
		load(r, c.Client(three...), 1<<20, 1024)
		w := startWriter(c.Client("node1", "node3"), "/bench/w")
		defer w.Stop()
		for i := 0; i < 2*b.cfg.stallRuns; i++ {
			on := i%2 == 0
			stallMode(c, on)
			c.WriteSpec(three...)
			ev := agentRepair(r, c, w, "node2", three...)
			repairs[on] = append(repairs[on], ev)
			b.say("stall run %d, mitigation %s: repair %s (stalled %v, restarts %d)", i+1, onOff(on), ms(ev.D), ev.Stalled, ev.Averted)
			ev = joinOne(r, c, w, three, "node4")
			joins[on] = append(joins[on], ev)
			b.say("stall run %d, mitigation %s: join %s (stalled %v, restarts %d)", i+1, onOff(on), ms(ev.D), ev.Stalled, ev.Averted)
		}
	})
	b.stall = append(b.stall,
		stallRow{"join (spec 3→4, the new agent started)", true, joins[true]},
		stallRow{"join (spec 3→4, the new agent started)", false, joins[false]},
		stallRow{"repair, corrupt WAL, 1 MB", true, repairs[true]},
		stallRow{"repair, corrupt WAL, 1 MB", false, repairs[false]})
}

// joinOne adds member name to the spec and starts its agent, timed until
// it is a healthy voter; then takes it out again (untimed): steady, the
// spec without it, its agent idle and stopped.
func joinOne(r testbed.TB, c *testbed.Cluster, w *writer, three []string, name string) event {
	steady()
	all := append(append([]string(nil), three...), name)
	s0, a0 := stalls(c), averted(c)
	t0 := time.Now()
	c.WriteSpec(all...)
	c.Start(name)
	end, _ := wait(r, c.Client(three...), "3→4", healthy(all...))
	ev := event{Stalled: stalls(c) > s0, Averted: averted(c) - a0, D: end.Sub(t0), W: w.window(t0, end)}
	steady()
	backups := len(c.Backups(name))
	c.WriteSpec(three...)
	wait(r, c.Client(three...), "4→3", healthy(three...))
	testbed.Eventually(r, time.Minute, name+" goes idle", func() string {
		if len(c.Backups(name)) <= backups || testbed.Alive(c.EtcdPID(name)) {
			return "not idle yet"
		}
		return ""
	})
	must(r, c.Stop(name))
	return ev
}

// stallRow is one line of the stall table.
type stallRow struct {
	what string
	on   bool
	evs  []event
}

// quantile is the q-quantile of the events' durations (nearest rank).
func quantile(evs []event, q float64) time.Duration {
	ds := durations(evs)
	if len(ds) == 0 {
		return 0
	}
	k := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}

func (b *bench) stallTable() string {
	if len(b.stall) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\netcd's publish stall (docs/etcd-publish-stall.md): the same cluster, agent.restartPublishStall alternating on and off\n\n")
	head := []string{"event", "restart on stall", "runs", "hit the 7 s stall", "stalls the agent restarted", "median", "p90", "worst", "failed writes", "target: no 7 s outlier with it on"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, s := range b.stall {
		stalled, restarts, failed, total := 0, 0, 0, 0
		for _, e := range s.evs {
			if e.Stalled {
				stalled++
			}
			restarts += e.Averted
			failed += e.W.Failed
			total += e.W.OK + e.W.Failed
		}
		met := "—"
		if s.on {
			met = yesNo(stalled == 0 && quantile(s.evs, 1) < 5*time.Second)
		}
		fmt.Fprintf(&sb, "| %s | %s | %d | %d | %d | %s | %s | %s | %d/%d | %s |\n", s.what, onOff(s.on), len(s.evs), stalled, restarts,
			ms(median(s.evs)), ms(quantile(s.evs, 0.9)), ms(quantile(s.evs, 1)), failed, total, met)
	}
	return sb.String()
}
