package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// fault is one injected fault, active until its member is seen as a
// healthy voter again (or has left the spec and the cluster). A fault that
// lasts (a partition, a slow link or host, a spec edit reaching the hosts
// one by one) also has an end: when the nemesis healed it. nemesis.jsonl
// has a line for each start ("event":"start"), each heal ("end") and each
// target seen healthy again ("recovered").
type fault struct {
	ID     int       `json:"id"`
	Event  string    `json:"event,omitempty"`
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
	// Cut are the members a partition cut off from the others.
	Cut []string `json:"cut,omitempty"`
	// Spec, Prev: a spec edit's new and previous member lists.
	Spec []string `json:"spec,omitempty"`
	Prev []string `json:"prev,omitempty"`
	// End: when a lasting fault was healed (zero for instant ones).
	End time.Time `json:"end,omitzero"`
	// Recovered: when the target was a healthy voter again (zero if not
	// seen before the run ended).
	Recovered time.Time `json:"recovered,omitzero"`
}

// over is when the fault stopped acting: its end, or for an instant one
// its recovery; the end of the run when neither came.
func (f fault) over(runEnd time.Time) time.Time {
	switch {
	case !f.End.IsZero() && !f.Recovered.IsZero():
		return maxTime(f.End, f.Recovered)
	case !f.End.IsZero():
		return f.End
	case !f.Recovered.IsZero():
		return f.Recovered
	}
	return runEnd
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

	spec         []string             // the members the spec lists now
	initial      []string             // the spec at the start
	specText     string               // and its text
	prevText     string               // the spec before the last edit
	active       map[string]int       // member -> the fault (index in Faults) it has not recovered from
	startAt      map[string]time.Time // agent (re)starts due
	crashSteps   []string
	enabled      map[string]bool
	min          map[string]int
	lasting      []*lasting // faults not healed yet
	deliveries   []delivery // spec files due on hosts
	cpu          map[string]*testbed.CPULimit
	big          *bigData             // nil or -big-mb 0: no big data
	nospace      *noSpace             // nil: the nospace fault is off
	nospaceQuota int64                // the spec's quota-backend-bytes with it
	joining      map[string]time.Time // members a spec edit added, until healthy
	healErrors   []string
	minSize      int
	maxSize      int
	Counts       map[string]int
	Skipped      map[string]int
	SpecHistory  []string
	Faults       []fault
}

// lasting is a fault that acts until healed: heal undoes it; tick, when
// set, runs on every pass of the nemesis meanwhile (a flapping link).
type lasting struct {
	id    int
	until time.Time
	heal  func() error
	tick  func()
}

// delivery is a spec file due on one host at a time.
type delivery struct {
	host  string
	text  string
	names []string // the members text lists
	at    time.Time
	old   bool // an old spec coming back
	fault int
}

type faultKind struct {
	name   string
	weight int
	net    bool // needs the network test bed
	once   bool // injected once per run at most
}

var faultKinds = []faultKind{
	{"kill-etcd", 20, false, false}, {"kill-agent", 12, false, false}, {"corrupt-wal", 15, false, false},
	{"spec-edit", 8, false, false}, {"spec-skew", 12, false, false},
	{"partition", 25, true, false}, {"slow-link", 8, true, false}, {"slow-host", 8, false, false},
	{"alarm-corrupt", 6, false, false}, {"impostor", 6, false, false},
	{"big-data", 6, false, true}, {"nospace", 5, false, false},
}

func newNemesis(c *testbed.Cluster, mon *monitor, seed uint64, dir string, logf func(string, ...any)) (*nemesis, error) {
	f, err := os.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return nil, err
	}
	return &nemesis{c: c, mon: mon, rnd: rand.New(rand.NewPCG(seed, 7)), logf: logf, events: f,
		active: map[string]int{}, startAt: map[string]time.Time{},
		crashSteps: []string{"snapshot", "remove", "move", "add", "start"},
		cpu:        map[string]*testbed.CPULimit{}, joining: map[string]time.Time{},
		minSize: 3, maxSize: len(c.Members),
		Counts: map[string]int{}, Skipped: map[string]int{}}, nil
}

// record notes a new fault and returns its index in Faults.
func (n *nemesis) record(f fault) int {
	n.Counts[f.Kind]++
	f.ID = len(n.Faults)
	n.Faults = append(n.Faults, f)
	n.event("start", f)
	n.logf("nemesis: %s %s %s", f.Kind, f.Target, f.Detail)
	return f.ID
}

func (n *nemesis) event(what string, f fault) {
	f.Event = what
	b, _ := json.Marshal(f)
	n.events.Write(append(b, '\n'))
}

// down marks member as hit by fault id until it is a healthy voter again.
func (n *nemesis) down(member string, id int) { n.active[member] = id }

// ended notes that the lasting fault id was healed.
func (n *nemesis) ended(id int) {
	n.Faults[id].End = time.Now()
	n.event("end", n.Faults[id])
	n.logf("nemesis: healed %s %s", n.Faults[id].Kind, n.Faults[id].Target)
}

// run injects faults until end, one every gap on average, and keeps the
// agents of the spec's members running (a killed agent is restarted after
// a random delay, as systemd would).
func (n *nemesis) run(end time.Time, gap time.Duration) {
	next := time.Now().Add(gap / 2)
	for time.Now().Before(end) {
		n.tend()
		if time.Now().After(next) {
			next = time.Now().Add(gap/2 + time.Duration(n.rnd.Int64N(int64(gap))))
			if !n.inject() {
				// Nothing injected: try again soon rather than a whole
				// gap later, so that a short run gets its faults.
				next = time.Now().Add(time.Second)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tend clears healed faults and (re)starts the agents that are due.
func (n *nemesis) tend() {
	n.tendLasting(false)
	n.deliver(false)
	n.tendBig()
	n.tendNoSpace()
	s, ok := n.mon.latest()
	for name, id := range n.active {
		f := n.Faults[id]
		if !ok || !s.Start.After(f.At.Add(500*time.Millisecond)) || n.stillActing(id) {
			continue
		}
		_, member := s.ByName(name)
		if (s.HealthyVoter(name) && n.c.AgentRunning(name)) || (!slices.Contains(n.spec, name) && !member) {
			delete(n.active, name)
			if n.Faults[id].Recovered.IsZero() {
				n.Faults[id].Recovered = s.Start
				n.event("recovered", n.Faults[id])
			}
		}
	}
	for name, since := range n.joining {
		if ok && s.Start.After(since) && s.HealthyVoter(name) || !slices.Contains(n.spec, name) {
			if slices.Contains(n.spec, name) {
				n.bigJoined(name, since)
			}
			delete(n.joining, name)
		}
	}
	for _, name := range n.spec {
		if n.c.AgentRunning(name) || n.specPending(name) {
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
			n.rejoinCgroup(name)
		}
	}
}

// specPending: a skewed spec edit has not reached host name yet.
func (n *nemesis) specPending(name string) bool {
	for _, d := range n.deliveries {
		if d.host == name && !d.old {
			return true
		}
	}
	return false
}

// heal stops injecting, heals every lasting fault, delivers the current
// spec to every host and starts every spec member's agent now.
func (n *nemesis) heal() {
	n.stopBig()
	n.stopNoSpace()
	n.tendLasting(true)
	n.deliver(true)
	for _, l := range n.cpu {
		if err := l.Remove(); err != nil {
			n.logf("nemesis: removing a cpu cgroup: %v", err)
		}
	}
	for _, name := range n.spec {
		if !n.c.AgentRunning(name) {
			n.c.Start(name)
		}
	}
	n.startAt = map[string]time.Time{}
	n.events.Close()
}

// pickKind picks the next fault kind by weight among the enabled kinds,
// and among those still short of their minimum while any is (so that a
// short run injects every kind it must: while a kind waits for a moment
// it may be injected, no other fault takes that moment).
// starveAfter is how many refusals make a short kind go first.
const starveAfter = 3

func (n *nemesis) pickKind() string {
	short := false
	for _, k := range faultKinds {
		short = short || n.enabled[k.name] && n.Counts[k.name] < n.min[k.name]
	}
	pickable := func(k faultKind) bool {
		return n.enabled[k.name] && (!short || n.Counts[k.name] < n.min[k.name]) && !(k.once && n.Counts[k.name] > 0)
	}
	// A kind still short of its minimum that was refused again and again
	// (it needs every member healthy, as alarm-corrupt does) would never
	// find its window while the other kinds keep one fault acting: it
	// goes first until it is injected.
	starved, most := "", starveAfter-1
	for _, k := range faultKinds {
		if short && pickable(k) && n.Skipped[k.name] > most {
			starved, most = k.name, n.Skipped[k.name]
		}
	}
	if starved != "" {
		return starved
	}
	total := 0
	for _, k := range faultKinds {
		if pickable(k) {
			total += k.weight
		}
	}
	pick := n.rnd.IntN(total)
	for _, k := range faultKinds {
		if !pickable(k) {
			continue
		}
		if pick < k.weight {
			return k.name
		}
		pick -= k.weight
	}
	return "kill-etcd"
}

// inject injects a fault of a kind pickKind picks; false when none could
// be injected now.
func (n *nemesis) inject() bool {
	kind := n.pickKind()
	var why string
	if n.nospace.acting() {
		// The nospace fault acts alone (nospace.go): not counted as
		// skipped, it was no moment to inject anything.
		return false
	}
	switch kind {
	case "kill-etcd":
		why = n.killEtcd()
	case "kill-agent":
		why = n.killAgent()
	case "corrupt-wal":
		why = n.corruptWAL()
	case "spec-edit":
		why = n.editSpec(false)
	case "spec-skew":
		why = n.editSpec(true)
	case "partition":
		why = n.partition()
	case "slow-link":
		why = n.slowLink()
	case "slow-host":
		why = n.slowHost()
	case "alarm-corrupt":
		why = n.alarmCorrupt()
	case "impostor":
		why = n.impostor()
	case "big-data":
		why = n.bigLoad()
	case "nospace":
		why = n.noSpaceFill()
	}
	if why != "" {
		n.Skipped[kind]++
		n.logf("nemesis: no %s now: %s", kind, why)
		return false
	}
	return true
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
	for name := range n.joining {
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
		n.down(t, n.record(f))
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
		n.down(t, n.record(f))
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
			n.down(t, n.record(fault{Kind: "kill-agent", Target: t, At: time.Now(), Detail: "meant to corrupt its WAL"}))
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
		n.down(t, n.record(f))
		return ""
	}
	if why == "" {
		why = "no candidate with a WAL and a running agent"
	}
	return why
}

// editSpec scales the spec up or down within [minSize, maxSize], once the
// cluster has reached the previous spec. Members to drop are picked at
// random; members to add are the hosts the spec does not list. Without
// skew every host gets the new spec file at once; with skew (spec-skew)
// the hosts get it one by one in random order, spread over 5 to 60 s, as
// a configuration tool rolls it out, and half the time the previous spec
// comes back to one host for a few seconds after it got the new one. A new
// member's agent starts when its host gets the spec that lists it.
func (n *nemesis) editSpec(skew bool) string {
	s, ok := n.mon.latest()
	if !ok || s.Err != nil {
		return "no observation of the cluster"
	}
	if len(n.deliveries) > 0 {
		return "the last spec edit has not reached every host yet"
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
				n.joining[m.Name] = time.Now()
			}
		}
	}
	sort.Strings(next)
	from, prev := fmt.Sprint(n.spec), len(n.spec)
	n.prevText, n.specText = n.specText, n.c.SpecText(next...)
	oldNames := n.spec
	n.spec = next
	n.SpecHistory = append(n.SpecHistory, fmt.Sprint(next))
	kind, detail := "spec-edit", "from "+from
	if size > prev {
		n.Counts["scale-up"]++
	} else {
		n.Counts["scale-down"]++
	}
	if !skew {
		n.c.WriteSpec(next...)
		for _, name := range next {
			if !n.c.AgentRunning(name) {
				n.c.Start(name)
			}
		}
		n.record(fault{Kind: kind, Target: fmt.Sprint(next), At: time.Now(), Detail: detail, Spec: next, Prev: oldNames})
		return ""
	}
	kind = "spec-skew"
	spread := time.Duration(5+n.rnd.IntN(56)) * time.Second
	hosts := n.c.AllNames()
	n.rnd.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
	now := time.Now()
	var order []string
	id := len(n.Faults)
	var last time.Time
	for i, h := range hosts {
		// The first host at once, the last at the end of the spread.
		at := now.Add(spread * time.Duration(i) / time.Duration(len(hosts)-1))
		n.deliveries = append(n.deliveries, delivery{host: h, text: n.specText, names: next, at: at, fault: id})
		order = append(order, fmt.Sprintf("%s+%s", h, at.Sub(now).Round(100*time.Millisecond)))
		last = at
	}
	if n.rnd.IntN(2) == 0 {
		// The previous spec comes back to one host, after it had the new
		// one, and the new one is written again a few seconds later.
		i := n.rnd.IntN(len(hosts))
		back := now.Add(spread*time.Duration(i)/time.Duration(len(hosts)-1) + time.Duration(1+n.rnd.IntN(10))*time.Second)
		again := back.Add(time.Duration(2+n.rnd.IntN(15)) * time.Second)
		n.deliveries = append(n.deliveries,
			delivery{host: hosts[i], text: n.prevText, names: oldNames, at: back, old: true, fault: id},
			delivery{host: hosts[i], text: n.specText, names: next, at: again, fault: id})
		order = append(order, fmt.Sprintf("old spec back on %s at +%s until +%s", hosts[i], back.Sub(now).Round(100*time.Millisecond), again.Sub(now).Round(100*time.Millisecond)))
		last = maxTime(last, again)
	}
	sort.SliceStable(n.deliveries, func(i, j int) bool { return n.deliveries[i].at.Before(n.deliveries[j].at) })
	detail += fmt.Sprintf("; hosts get it over %s: %s", last.Sub(now).Round(100*time.Millisecond), strings.Join(order, ", "))
	n.record(fault{Kind: kind, Target: fmt.Sprint(next), At: now, Detail: detail, Spec: next, Prev: oldNames})
	n.deliver(false)
	return ""
}

// deliver writes the spec files that are due (all of them when now), and
// starts the agent of a host whose new spec lists it. The last delivery of
// a skewed edit ends its fault.
func (n *nemesis) deliver(now bool) {
	for len(n.deliveries) > 0 && (now || !time.Now().Before(n.deliveries[0].at)) {
		d := n.deliveries[0]
		n.deliveries = n.deliveries[1:]
		n.c.WriteHostSpec(d.host, d.text)
		what := "new"
		if d.old {
			what = "OLD"
		}
		n.logf("nemesis: %s spec %v on %s", what, d.names, d.host)
		if !d.old && slices.Contains(d.names, d.host) && slices.Contains(n.spec, d.host) && !n.c.AgentRunning(d.host) {
			if _, due := n.startAt[d.host]; !due {
				n.c.Start(d.host)
			}
		}
		pending := false
		for _, o := range n.deliveries {
			pending = pending || o.fault == d.fault
		}
		if !pending {
			n.ended(d.fault)
		}
	}
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
