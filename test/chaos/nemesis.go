package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// fault is one injected fault, active until its member is seen as a
// healthy voter again (or has left the spec and the cluster).
type fault struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// nemesis injects faults at random, but never more than the cluster can
// survive by itself: a fault is injected only if the healthy voters left
// without its target (and every member still faulty) are a quorum, both
// of the current voters and of the spec. The point is to see whether the
// agents make things worse, and a run where the nemesis broke quorum
// itself would prove nothing.
type nemesis struct {
	c      *testbed.Cluster
	mon    *monitor
	rnd    *rand.Rand
	logf   func(format string, args ...any)
	events *os.File

	spec        []string // the members the spec lists now
	active      map[string]fault
	startAt     map[string]time.Time // agent (re)starts due
	crashSteps  []string
	partitions  string // "" when partitions can be injected, else why not
	minSize     int
	maxSize     int
	Counts      map[string]int
	Skipped     map[string]int
	SpecHistory []string
	Faults      []fault
}

var faultKinds = []struct {
	name   string
	weight int
}{
	{"kill-etcd", 30}, {"kill-agent", 20}, {"corrupt-wal", 20}, {"spec-edit", 15}, {"partition", 15},
}

func newNemesis(c *testbed.Cluster, mon *monitor, seed uint64, dir string, logf func(string, ...any)) (*nemesis, error) {
	f, err := os.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return nil, err
	}
	return &nemesis{c: c, mon: mon, rnd: rand.New(rand.NewPCG(seed, 7)), logf: logf, events: f,
		active: map[string]fault{}, startAt: map[string]time.Time{},
		crashSteps: []string{"snapshot", "remove", "move", "add", "start"},
		minSize:    3, maxSize: len(c.Members),
		Counts: map[string]int{}, Skipped: map[string]int{}}, nil
}

func (n *nemesis) record(f fault) {
	n.Counts[f.Kind]++
	n.Faults = append(n.Faults, f)
	b, _ := json.Marshal(f)
	n.events.Write(append(b, '\n'))
	n.logf("nemesis: %s %s %s", f.Kind, f.Target, f.Detail)
}

// run injects faults until end, one every gap on average, and keeps the
// agents of the spec's members running (a killed agent is restarted after
// a random delay, as systemd would).
func (n *nemesis) run(end time.Time, gap time.Duration) {
	next := time.Now().Add(gap / 2)
	for time.Now().Before(end) {
		n.tend()
		if time.Now().After(next) {
			n.inject()
			next = time.Now().Add(gap/2 + time.Duration(n.rnd.Int64N(int64(gap))))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tend clears healed faults and (re)starts the agents that are due.
func (n *nemesis) tend() {
	s, ok := n.mon.latest()
	for name, f := range n.active {
		if !ok || !s.Start.After(f.At.Add(500*time.Millisecond)) {
			continue
		}
		_, member := s.ByName(name)
		if (s.HealthyVoter(name) && n.c.AgentRunning(name)) || (!slices.Contains(n.spec, name) && !member) {
			delete(n.active, name)
		}
	}
	for _, name := range n.spec {
		if n.c.AgentRunning(name) {
			continue
		}
		if _, due := n.startAt[name]; !due {
			n.startAt[name] = time.Now().Add(time.Duration(500+n.rnd.IntN(2500)) * time.Millisecond)
		}
	}
	for name, at := range n.startAt {
		if time.Now().Before(at) {
			continue
		}
		delete(n.startAt, name)
		if slices.Contains(n.spec, name) && !n.c.AgentRunning(name) {
			n.c.Start(name)
		}
	}
}

// heal stops injecting and starts every spec member's agent now.
func (n *nemesis) heal() {
	for _, name := range n.spec {
		if !n.c.AgentRunning(name) {
			n.c.Start(name)
		}
	}
	n.startAt = map[string]time.Time{}
	n.events.Close()
}

func (n *nemesis) inject() {
	kinds := faultKinds
	if n.partitions != "" {
		kinds = kinds[:len(kinds)-1] // said once at the start
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	pick := n.rnd.IntN(total)
	kind := kinds[len(kinds)-1].name
	for _, k := range kinds {
		if pick < k.weight {
			kind = k.name
			break
		}
		pick -= k.weight
	}
	var why string
	switch kind {
	case "kill-etcd":
		why = n.killEtcd()
	case "kill-agent":
		why = n.killAgent()
	case "corrupt-wal":
		why = n.corruptWAL()
	case "spec-edit":
		why = n.editSpec()
	case "partition":
		why = "partitions unavailable: " + n.partitions
	}
	if why != "" {
		n.Skipped[kind]++
		n.logf("nemesis: no %s now: %s", kind, why)
	}
}

// candidates are the spec's members that a new fault may hit now, in
// random order; empty with the reason when none may.
func (n *nemesis) candidates() ([]string, string) {
	s, ok := n.mon.latest()
	if !ok || s.Err != nil || time.Since(s.End) > 2*time.Second {
		return nil, "no fresh observation of the cluster"
	}
	voters := s.Voters()
	down := map[string]bool{}
	for name := range n.active {
		down[name] = true
	}
	for name := range n.startAt {
		down[name] = true
	}
	for _, v := range voters {
		if !v.Healthy() {
			down[v.Name] = true
		}
	}
	specVoters := 0
	for _, name := range n.spec {
		if m, ok := s.ByName(name); ok && !m.Learner {
			specVoters++
		}
	}
	quorumAll := len(voters)/2 + 1
	quorumSpec := min(len(n.spec), specVoters)/2 + 1
	var out []string
	for _, target := range n.spec {
		if down[target] || !s.HealthyVoter(target) {
			continue
		}
		healthyAll, healthySpec := 0, 0
		for _, v := range voters {
			if v.Healthy() && !down[v.Name] && v.Name != target {
				healthyAll++
				if slices.Contains(n.spec, v.Name) {
					healthySpec++
				}
			}
		}
		if healthyAll >= quorumAll && healthySpec >= quorumSpec {
			out = append(out, target)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Sprintf("no member may fail now (%d voters, %d faulty or starting)", len(voters), len(down))
	}
	n.rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, ""
}

func (n *nemesis) killEtcd() string {
	targets, why := n.candidates()
	for _, t := range targets {
		pid := n.c.EtcdPID(t)
		if !n.c.AgentRunning(t) || !testbed.Alive(pid) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			continue
		}
		f := fault{Kind: "kill-etcd", Target: t, At: time.Now(), Detail: fmt.Sprintf("pid %d", pid)}
		n.active[t] = f
		n.record(f)
		return ""
	}
	if why == "" {
		why = "no candidate runs etcd"
	}
	return why
}

func (n *nemesis) killAgent() string {
	targets, why := n.candidates()
	for _, t := range targets {
		if !n.c.AgentRunning(t) {
			continue
		}
		pid := n.c.AgentPID(t)
		n.c.Kill9(t)
		f := fault{Kind: "kill-agent", Target: t, At: time.Now(), Detail: fmt.Sprintf("pid %d", pid)}
		n.active[t] = f
		n.record(f)
		// restarted by tend after a random delay
		return ""
	}
	if why == "" {
		why = "no candidate runs an agent"
	}
	return why
}

// corruptWAL stops a member (kill -9 of its agent, which takes etcd down
// with it), flips a byte in its WAL, and starts the agent again; one time
// in three the agent is told to crash at a random repair step first.
func (n *nemesis) corruptWAL() string {
	targets, why := n.candidates()
	for _, t := range targets {
		wals, _ := filepath.Glob(filepath.Join(n.c.DataDir(t), "member", "wal", "*.wal"))
		if !n.c.AgentRunning(t) || len(wals) == 0 {
			continue
		}
		etcdPID := n.c.EtcdPID(t)
		n.c.Kill9(t)
		for i := 0; i < 50 && testbed.Alive(etcdPID); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if testbed.Alive(etcdPID) {
			n.logf("nemesis: etcd %d of %s outlived its agent; not corrupting", etcdPID, t)
			n.active[t] = fault{Kind: "kill-agent", Target: t, At: time.Now()}
			n.Counts["kill-agent"]++
			return ""
		}
		file := n.c.CorruptWAL(t)
		f := fault{Kind: "corrupt-wal", Target: t, At: time.Now(), Detail: filepath.Base(file)}
		if n.rnd.IntN(3) == 0 {
			step := n.crashSteps[n.rnd.IntN(len(n.crashSteps))]
			f.Detail += ", agent crashes before repair step " + step
			n.c.Start(t, "ETCDKEEPER_TEST_CRASH_AT="+step)
			n.Counts["crash-at-"+step]++
		} else {
			n.c.Start(t)
		}
		n.active[t] = f
		n.record(f)
		return ""
	}
	if why == "" {
		why = "no candidate with a WAL and a running agent"
	}
	return why
}

// editSpec scales the spec up or down within [minSize, maxSize], once the
// cluster has reached the previous spec. Members to drop are picked at
// random; members to add are the hosts the spec does not list.
func (n *nemesis) editSpec() string {
	s, ok := n.mon.latest()
	if !ok || s.Err != nil {
		return "no observation of the cluster"
	}
	if why := matches(s, n.spec); why != "" {
		return "the last spec edit has not converged: " + why
	}
	var sizes []int
	for size := n.minSize; size <= n.maxSize; size++ {
		if size != len(n.spec) {
			sizes = append(sizes, size)
		}
	}
	size := sizes[n.rnd.IntN(len(sizes))]
	next := append([]string(nil), n.spec...)
	if size < len(next) {
		n.rnd.Shuffle(len(next), func(i, j int) { next[i], next[j] = next[j], next[i] })
		next = next[:size]
	} else {
		for _, m := range n.c.Members {
			if len(next) < size && !slices.Contains(next, m.Name) {
				next = append(next, m.Name)
			}
		}
	}
	sort.Strings(next)
	from, prev := fmt.Sprint(n.spec), len(n.spec)
	n.spec = next
	n.c.WriteSpec(next...)
	n.SpecHistory = append(n.SpecHistory, fmt.Sprint(next))
	for _, name := range next {
		if !n.c.AgentRunning(name) {
			n.c.Start(name)
		}
	}
	n.record(fault{Kind: "spec-edit", Target: fmt.Sprint(next), At: time.Now(), Detail: "from " + from})
	if size > prev {
		n.Counts["scale-up"]++
	} else {
		n.Counts["scale-down"]++
	}
	return ""
}

// matches reports "" when the cluster's members are exactly names, none a
// learner, health aside: the spec edit has taken effect, though a member
// may be down (testbed's ExactVoters would wait for it to heal too).
func matches(s testbed.Observation, names []string) string {
	if len(s.Members) != len(names) {
		return fmt.Sprintf("%d members, spec lists %d", len(s.Members), len(names))
	}
	for _, m := range s.Members {
		if !m.Started() || !slices.Contains(names, m.Name) {
			return fmt.Sprintf("member %q (%x) not in the spec", m.Name, m.ID)
		}
		if m.Learner {
			return "learner " + m.Name
		}
	}
	return ""
}
