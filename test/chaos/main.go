// Command chaos runs a bounded chaos test of etcdkeeper on the test bed
// (real agents, real etcd; as root each member in its own network
// namespace, else on 127.0.x.y): clients do gets, puts and
// compare-and-swaps with unique values and record every operation, while a
// nemesis kills etcd and agents with SIGKILL, corrupts stopped members'
// WALs, edits the spec between 3 and 5 members (on every host at once, or
// host by host with an old spec coming back), partitions members, slows
// their links and CPUs, and fills the cluster to its quota (NOSPACE) and
// frees it again. It then heals, waits for convergence and
// checks that the history is linearizable (porcupine), that no
// acknowledged write was lost, that the membership equals the spec
// (healthy voters, no learner), that no agent's membership change left
// fewer healthy voters than a quorum, that no agent took a healthy member
// out of service during a partition or a slow link or host, that members
// kept their IDs, that the cluster served while faults acted, that every
// agent log line parses, and that the run injected what it was asked to.
// `make chaos` runs a few minutes, `make chaos-smoke` one.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

type config struct {
	prog         testbed.Program
	duration     time.Duration
	hosts        int
	initial      int
	clients      int
	rate         float64
	keys         int
	opTimeout    time.Duration
	gap          time.Duration
	converge     time.Duration
	maxOps       int
	checkTimeout time.Duration
	seed         uint64
	net          string
	faults       string
	minFaults    string
	minAnswered  float64
	bigMB        int
}

func main() {
	cfg := config{prog: testbed.Program{Name: "chaos"}}
	cfg.prog.AddFlags(flag.CommandLine)
	flag.DurationVar(&cfg.duration, "duration", 3*time.Minute, "how long faults are injected (then heal, converge, check)")
	flag.IntVar(&cfg.hosts, "hosts", 5, "hosts (agents); the spec lists 3 to this many of them")
	flag.IntVar(&cfg.initial, "initial", 3, "members the spec lists at the start")
	flag.IntVar(&cfg.clients, "clients", 4, "concurrent clients")
	flag.Float64Var(&cfg.rate, "rate", 20, "operations per second per client")
	flag.IntVar(&cfg.keys, "keys", 5, "keys the clients share (few keep the checker fast)")
	flag.DurationVar(&cfg.opTimeout, "op-timeout", 5*time.Second, "deadline of each client operation; past it the outcome is unknown")
	flag.DurationVar(&cfg.gap, "gap", 5*time.Second, "mean time between two faults")
	flag.DurationVar(&cfg.converge, "converge", 3*time.Minute, "how long the healed cluster may take to reach the spec")
	flag.IntVar(&cfg.maxOps, "max-ops", 60000, "bound of the history; clients stop issuing operations beyond it")
	flag.DurationVar(&cfg.checkTimeout, "check-timeout", 3*time.Minute, "bound of the linearizability check")
	flag.Uint64Var(&cfg.seed, "seed", 0, "random seed (0: from the clock; printed)")
	flag.StringVar(&cfg.faults, "faults", "all", "fault kinds to inject, comma-separated: kill-etcd, kill-agent, corrupt-wal, spec-edit, spec-skew, partition, slow-link, slow-host, alarm-corrupt, impostor, big-data, nospace (all: every kind the test bed can inject; partition and slow-link need -net ns)")
	flag.StringVar(&cfg.minFaults, "min-faults", "1", "the run fails unless at least this many faults of each enabled kind were injected: a number for every kind, or kind=n,... (kinds not named: 0)")
	flag.Float64Var(&cfg.minAnswered, "min-answered", 0.5, "the run fails when fewer than this share of the operations begun while a fault acted got an answer")
	flag.IntVar(&cfg.bigMB, "big-mb", 100, "megabytes of 100 KB values the big-data fault loads once (then a member is repaired with them; they stay); 0: no big data")
	flag.StringVar(&cfg.net, "net", "auto", "where the members run: ns (each in its own network namespace on a bridge: partitions and slow links possible; needs root), loopback (127.0.x.y, no network faults), auto (ns when possible)")
	flag.Parse()
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	switch cfg.net {
	case "auto", "ns":
		why := testbed.CanIsolate()
		if why != "" && cfg.net == "ns" {
			fmt.Fprintf(os.Stderr, "chaos: -net ns: %s\n", why)
			os.Exit(2)
		}
		if why != "" {
			fmt.Fprintf(os.Stderr, "chaos: members on loopback, no network faults: %s\n", why)
			cfg.net = "loopback"
			break
		}
		cfg.net = "ns"
		if !testbed.Isolated() {
			// The whole run, in private network, mount and PID
			// namespaces: nothing of it outlives this process.
			code, err := testbed.Isolate()
			if err != nil {
				fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
				code = 2
			}
			os.Exit(code)
		}
		if err := testbed.SetupIsolated(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			os.Exit(2)
		}
	case "loopback":
	default:
		fmt.Fprintf(os.Stderr, "chaos: -net %q: ns, loopback or auto\n", cfg.net)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func run(cfg config) int {
	r, err := cfg.prog.Setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dir := cfg.prog.Dir
	ch := &chaos{cfg: cfg, r: r, dir: dir, started: time.Now()}
	cfg.prog.OnInterrupt(r.Close)
	err = testbed.Catch(ch.run)
	r.Close()
	if err != nil {
		ch.fail("%v", err)
	}
	summary := ch.summary()
	fmt.Print(summary)
	_ = os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644)
	// The work dir a failed run keeps holds the history and the nemesis's
	// events next to the logs.
	return cfg.prog.Exit(len(ch.failures) > 0 || r.Failed())
}

// chaos is one run and what it found.
type chaos struct {
	cfg     config
	r       *testbed.Runner
	dir     string
	started time.Time

	c        *testbed.Cluster
	nem      *nemesis
	rec      *recorder
	ops      []op
	opsStart time.Time // the clients' time 0
	healedAt time.Time
	failures []string
	notes    []string
	phases   []string
	facts    []string
}

func (ch *chaos) say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos %s %s\n", time.Since(ch.started).Round(time.Second), fmt.Sprintf(format, args...))
}

func (ch *chaos) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	ch.failures = append(ch.failures, msg)
	ch.say("FAIL: %s", msg)
}

func (ch *chaos) phase(name string, start time.Time) {
	ch.phases = append(ch.phases, fmt.Sprintf("%s %s", name, time.Since(start).Round(time.Second)))
}

func (ch *chaos) run() {
	cfg := ch.cfg
	ch.say("seed %d, %d hosts, spec of %d, %d clients × %.0f ops/s on %d keys, faults for %s; dir %s",
		cfg.seed, cfg.hosts, cfg.initial, cfg.clients, cfg.rate, cfg.keys, cfg.duration, ch.dir)
	t := time.Now()
	var c *testbed.Cluster
	if cfg.net == "ns" {
		c = testbed.NewOnNet(ch.r, cfg.hosts)
	} else {
		c = testbed.New(ch.r, cfg.hosts)
	}
	ch.c = c
	// Each agent reads its own copy of the spec, as on real hosts: a spec
	// edit can reach them at different times.
	c.PerHostSpec = true
	// Chaos repairs the same member more than the default 3 times an hour.
	// The NOSPACE procedure compacts (its default): the history recorder
	// has read the revisions before the compaction.
	c.Extra = "repair:\n  maxPerHour: 100\n"
	var quota int64
	if cfg.wants("nospace") {
		// A small quota, so that the nospace fault fills it in seconds.
		quota = noSpaceQuota(cfg.bigMB)
		c.EtcdFlags = fmt.Sprintf("    quota-backend-bytes: \"%d\"\n", quota)
	}
	initial := c.AllNames()[:cfg.initial]
	c.WriteSpec(initial...)
	for _, n := range initial {
		c.Start(n)
	}
	c.WaitVoters(2*time.Minute, initial...)
	ch.phase("bootstrap", t)

	var endpoints []string
	for _, m := range c.Members {
		endpoints = append(endpoints, m.ClientURL())
	}
	mon := newMonitor(c.Client(), 250*time.Millisecond)
	if c.OnNet() {
		for _, m := range c.Members {
			mon.via = append(mon.via, c.Client(m.Name))
		}
	}
	go mon.run()
	defer mon.halt()

	var keys []string
	for i := 0; i < cfg.keys; i++ {
		keys = append(keys, fmt.Sprintf("/chaos/k%d", i))
	}
	// etcd's history of the clients' keys, read from revision 1 as it
	// happens, before any compaction can take it (recorder.go).
	rec, err := startRecorder(endpoints, c.OnNet(), "/chaos/")
	if err != nil {
		ch.r.Fatalf("%v", err)
	}
	ch.rec = rec
	hist := &history{max: cfg.maxOps}
	w := &workload{endpoints: endpoints, keys: keys, rate: cfg.rate, timeout: cfg.opTimeout, start: time.Now(), hist: hist, keepalive: c.OnNet()}
	if err := w.initKeys(); err != nil {
		ch.r.Fatalf("%v", err)
	}
	if err := w.run(cfg.clients, cfg.seed); err != nil {
		ch.r.Fatalf("clients: %v", err)
	}

	nem, err := newNemesis(c, mon, cfg.seed, ch.dir, func(f string, a ...any) { ch.say(f, a...) })
	if err != nil {
		ch.r.Fatalf("%v", err)
	}
	ch.nem = nem
	nem.big = newBigData(cfg.bigMB)
	nem.spec = initial
	nem.initial = initial
	nem.specText = c.SpecText(initial...)
	if err := ch.enable(nem); err != nil {
		ch.r.Fatalf("%v", err)
	}
	if nem.enabled["nospace"] {
		nem.nospace, nem.nospaceQuota = newNoSpace(rec), quota
	}

	t = time.Now()
	nem.run(time.Now().Add(cfg.duration), cfg.gap)
	ch.phase("faults", t)

	t = time.Now()
	ch.say("healing: every agent of the spec %v running; waiting for convergence", nem.spec)
	nem.heal()
	healed := time.Now()
	if why := waitSpec(mon, nem.spec, healed, cfg.converge); why != "" {
		ch.fail("membership does not equal the spec %v with healthy voters and no learner %s after healing: %s", nem.spec, cfg.converge, why)
	} else {
		ch.facts = append(ch.facts, fmt.Sprintf("membership equals the spec %v: all healthy voters, no learner", nem.spec))
	}
	if why := waitNoAlarms(mon, healed, cfg.converge); why != "" {
		ch.fail("%s after healing", why)
	} else {
		ch.facts = append(ch.facts, "no alarm raised after healing (the agents disarmed the CORRUPT alarms of the members they repaired, and NOSPACE)")
	}
	ch.phase("heal and converge", t)

	w.halt()
	cli, err := w.client()
	if err == nil {
		for _, k := range keys {
			w.get(cli, 0, k)
		}
		cli.Close()
	}
	ch.ops = hist.snapshot()
	ch.opsStart, ch.healedAt = w.start, healed
	t = time.Now()
	ch.check(mon, endpoints)
	ch.phase("checks", t)
}

// waitSpec waits until the monitor sees exactly the spec's members, all
// healthy voters, in an observation begun after since (the heal).
func waitSpec(mon *monitor, spec []string, since time.Time, d time.Duration) string {
	deadline := time.Now().Add(d)
	why := "no observation"
	for time.Now().Before(deadline) {
		if s, ok := mon.latest(); ok && s.Start.After(since) {
			if _, why = s.ExactVoters(spec...); why == "" {
				return ""
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return why
}

func (ch *chaos) check(mon *monitor, endpoints []string) {
	ch.checkFaultCounts()
	if err := writeHistory(filepath.Join(ch.dir, "history.jsonl"), ch.ops); err != nil {
		ch.fail("writing the history: %v", err)
	}
	if why := ch.rec.halt(time.Minute); why != "" {
		ch.fail("the history recorder did not catch up within a minute: %s", why)
	}
	rec := ch.rec.read()
	end, rev, err := etcdHistory(endpoints, "/chaos/")
	if err != nil {
		ch.fail("reading etcd's history: %v", err)
		return
	}
	if problems := historyProblems(rec, end); len(problems) > 0 {
		for i, p := range problems {
			if i == 5 {
				ch.fail("... and %d more differences between the recorder's history and etcd's", len(problems)-i)
				break
			}
			ch.fail("history: %s", p)
		}
	} else {
		from := "from revision 1 (nothing compacted)"
		if end.From > 1 {
			from = fmt.Sprintf("from revision %d, the last compaction (the recorder read the %d writes before it)", end.From, len(rec.Writes)-len(end.Tail))
		}
		ch.facts = append(ch.facts, fmt.Sprintf("history: the recorder read %d writes from revision 1 (its watch begun again %d times, %d progress notices); etcd's history %s is the same write for write, and each key's current value is its last write in it",
			len(rec.Writes), rec.Breaks, rec.Notices, from))
	}
	writes := rec.Writes
	resolveUnknown(ch.ops, writes)
	_ = writeHistory(filepath.Join(ch.dir, "history.jsonl"), ch.ops)

	acked := 0
	for _, o := range ch.ops {
		if o.OK && !o.Unknown && o.Kind != "get" {
			acked++
		}
	}
	if lost := lostWrites(ch.ops, writes); len(lost) > 0 {
		ch.fail("%d acknowledged writes lost, e.g. %s", len(lost), lost[0])
	} else {
		ch.facts = append(ch.facts, fmt.Sprintf("no acknowledged write lost: all %d are in etcd's history at their revision (%d writes in it)", acked, len(writes)))
	}

	res, n := linearizable(ch.ops, ch.cfg.checkTimeout, filepath.Join(ch.dir, "linearizability.html"))
	switch res {
	case "Ok":
		ch.facts = append(ch.facts, fmt.Sprintf("linearizable: porcupine checked %d operations on %d keys", n, ch.cfg.keys))
	case "Unknown":
		ch.fail("linearizability undecided: porcupine ran out of its %s on %d operations", ch.cfg.checkTimeout, n)
	default:
		ch.fail("history is NOT linearizable (%d operations); see %s", n, filepath.Join(ch.dir, "linearizability.html"))
	}

	// Every healthy voter must hold the same data (after a failed
	// convergence, the members that are not healthy voters are left out).
	var specEPs []string
	last, _ := mon.latest()
	for _, name := range ch.nem.spec {
		if last.HealthyVoter(name) {
			specEPs = append(specEPs, ch.c.Member(name).ClientURL())
		}
	}
	if err := hashesAgree(specEPs, rev); err != nil {
		ch.fail("%v", err)
	} else {
		ch.facts = append(ch.facts, fmt.Sprintf("the %d members' KV hashes agree at revision %d", len(specEPs), rev))
	}

	logs := map[string]string{}
	for _, m := range ch.c.Members {
		logs[m.Name] = ch.c.LogPath(m.Name)
	}
	changes, events, bad, err := agentLogs(logs)
	if err != nil {
		ch.fail("reading the agents' logs: %v", err)
	}
	for i, line := range bad {
		if i == 5 {
			ch.fail("... and %d more unparsable agent log lines", len(bad)-i)
			break
		}
		ch.fail("agent log line is not the agent's JSON: %s", line)
	}
	ch.checkAnswered()
	ch.checkNoSpace()
	ch.checkOutOfService(events, mon)
	ch.checkIDs(mon)
	checked, raced, unobserved := 0, 0, 0
	for _, v := range quorumCheck(changes, mon, ch.nem.Faults) {
		checked++
		switch {
		case v.Problem != "" && v.Note == "":
			ch.fail("agent %s's %s of %s at %s: %s", v.C.Agent, v.C.Kind, nameOr(v.C.Target, fmt.Sprintf("%x", v.C.ID)), v.C.At.Format("15:04:05.000"), v.Problem)
		case v.Problem != "":
			raced++
			ch.notes = append(ch.notes, fmt.Sprintf("agent %s's %s of %x at %s looked unsafe only by a racing fault: %s (%s)", v.C.Agent, v.C.Kind, v.C.ID, v.C.At.Format("15:04:05.000"), v.Problem, v.Note))
		case v.Note != "":
			unobserved++
			ch.notes = append(ch.notes, fmt.Sprintf("agent %s's %s of %x at %s: %s", v.C.Agent, v.C.Kind, v.C.ID, v.C.At.Format("15:04:05.000"), v.Note))
		}
	}
	ch.facts = append(ch.facts, fmt.Sprintf("quorum: the agents logged %d membership changes; none of the %d removals and promotions left fewer healthy voters than a quorum (%d raced a fault, %d unobserved)",
		len(changes), checked, raced, unobserved))
	samples, lostQ := 0, 0
	for _, s := range mon.samples() {
		if s.Err != nil {
			lostQ++
		}
		samples++
	}
	ch.notes = append(ch.notes, fmt.Sprintf("monitor: %d samples, %d without an answer from the cluster (no leader or no quorum reachable)", samples, lostQ))
	repairs, joins := 0, 0
	for _, path := range logs {
		b, _ := os.ReadFile(path)
		repairs += strings.Count(string(b), `"kind":"repair","old-member-id"`)
		joins += strings.Count(string(b), `"kind":"join","old-member-id"`)
	}
	ch.facts = append(ch.facts, fmt.Sprintf("the agents finished %d repairs and %d joins (their logs)", repairs, joins))
	// The quorum check reads the agents' log lines: if their wording
	// changed, it would silently check nothing.
	rejoinRemoves := 0
	for _, c := range changes {
		if c.Kind == "rejoin-remove" {
			rejoinRemoves++
		}
	}
	if repairs > 0 && rejoinRemoves == 0 {
		ch.fail(`the agents finished %d repairs but no {"msg":"rejoin step","step":"remove"} line was found: did the log format change? The quorum check depends on it`, repairs)
	}
}

func (ch *chaos) summary() string {
	var b strings.Builder
	result := "PASS"
	if len(ch.failures) > 0 || ch.r.Failed() {
		result = "FAIL"
	}
	fmt.Fprintf(&b, "\nchaos run: %s (seed %d, %s in all: %s)\n", result, ch.cfg.seed, time.Since(ch.started).Round(time.Second), strings.Join(ch.phases, ", "))
	// Operations.
	type tally struct{ ok, failed, unknown, happened, refused, refusedHappened int }
	byKind := map[string]*tally{"get": {}, "put": {}, "cas": {}}
	for _, o := range ch.ops {
		t := byKind[o.Kind]
		switch {
		case o.Refused:
			t.refused++
			if o.Resolved == "happened" {
				t.refusedHappened++
			}
		case o.Unknown:
			t.unknown++
			if o.Resolved == "happened" {
				t.happened++
			}
		case o.OK:
			t.ok++
		default:
			t.failed++
		}
	}
	fmt.Fprintf(&b, "operations: %d: get %d ok, %d unknown; put %d ok, %d unknown (%d of them happened), %d refused with NOSPACE (%d happened); cas %d succeeded, %d compare failed, %d unknown (%d happened), %d refused with NOSPACE (%d happened)\n",
		len(ch.ops), byKind["get"].ok, byKind["get"].unknown, byKind["put"].ok, byKind["put"].unknown, byKind["put"].happened, byKind["put"].refused, byKind["put"].refusedHappened,
		byKind["cas"].ok, byKind["cas"].failed, byKind["cas"].unknown, byKind["cas"].happened, byKind["cas"].refused, byKind["cas"].refusedHappened)
	if ch.nem != nil {
		cnt := ch.nem.Counts
		crashes := 0
		var steps []string
		for k, n := range cnt {
			if step, ok := strings.CutPrefix(k, "crash-at-"); ok {
				crashes += n
				steps = append(steps, fmt.Sprintf("%s %d", step, n))
			}
		}
		sort.Strings(steps)
		total := 0
		for _, k := range faultKinds {
			total += cnt[k.name]
		}
		var parts []string
		for _, k := range []string{"minority", "leader", "one-way", "flap"} {
			if cnt["partition-"+k] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, cnt["partition-"+k]))
			}
		}
		kinds := []string{
			fmt.Sprintf("kill -9 etcd %d", cnt["kill-etcd"]),
			fmt.Sprintf("kill -9 agent %d", cnt["kill-agent"]),
			fmt.Sprintf("corrupt WAL %d (agent crashed before a repair step in %d: %s)", cnt["corrupt-wal"], crashes, strings.Join(steps, ", ")),
			fmt.Sprintf("spec edit %d + spec skew %d (%d up, %d down)", cnt["spec-edit"], cnt["spec-skew"], cnt["scale-up"], cnt["scale-down"]),
			fmt.Sprintf("partition %d (%s)", cnt["partition"], strings.Join(parts, ", ")),
			fmt.Sprintf("slow link %d", cnt["slow-link"]),
			fmt.Sprintf("slow host %d", cnt["slow-host"]),
			fmt.Sprintf("alarm CORRUPT %d", cnt["alarm-corrupt"]),
			fmt.Sprintf("impostor %d", cnt["impostor"]),
			fmt.Sprintf("big data %d (repairs begun right after the load: %d)", cnt["big-data"], cnt["big-repair"]),
			fmt.Sprintf("nospace %d", cnt["nospace"]),
		}
		fmt.Fprintf(&b, "faults injected: %d: %s\n", total, strings.Join(kinds, ", "))
		var skipped []string
		for k, n := range ch.nem.Skipped {
			skipped = append(skipped, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(skipped)
		if len(skipped) == 0 {
			skipped = []string{"none"}
		}
		fmt.Fprintf(&b, "faults not injected when due (unsafe for quorum at that moment, or the last spec edit not converged yet): %s\n", strings.Join(skipped, ", "))
		fmt.Fprintf(&b, "spec sizes: %v\n", ch.nem.SpecHistory)
		if big := ch.nem.bigSummary(); big != "" {
			fmt.Fprintf(&b, "%s\n", big)
		}
		if ns := ch.nem.noSpaceSummary(ch.ops, ch.opsStart, ch.disarms()); ns != "" {
			fmt.Fprintf(&b, "%s\n", ns)
		}
	}
	for _, f := range ch.facts {
		fmt.Fprintf(&b, "ok: %s\n", f)
	}
	for _, n := range ch.notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, f := range ch.failures {
		fmt.Fprintf(&b, "FAILED: %s\n", f)
	}
	return b.String()
}

// enable sets the nemesis's fault kinds and their minimum counts from
// -faults and -min-faults; the kinds the test bed cannot inject here are
// left out, and said so.
func (ch *chaos) enable(nem *nemesis) error {
	nem.enabled, nem.min = map[string]bool{}, map[string]int{}
	known := map[string]faultKind{}
	for _, k := range faultKinds {
		known[k.name] = k
	}
	want := map[string]bool{}
	if ch.cfg.faults == "all" {
		for _, k := range faultKinds {
			want[k.name] = true
		}
	} else {
		for _, name := range strings.Split(ch.cfg.faults, ",") {
			if _, ok := known[name]; !ok {
				return fmt.Errorf("-faults: unknown kind %q", name)
			}
			want[name] = true
		}
	}
	for _, k := range faultKinds {
		switch {
		case !want[k.name]:
		case k.name == "big-data" && ch.cfg.bigMB <= 0:
			ch.notes = append(ch.notes, "big-data not injected: -big-mb 0")
		case k.net && !ch.c.OnNet():
			ch.notes = append(ch.notes, k.name+" not injected: the members run on loopback (-net loopback, or no root): a partition or a slow link needs each member in its own network namespace")
		default:
			nem.enabled[k.name] = true
		}
	}
	if n, err := strconv.Atoi(ch.cfg.minFaults); err == nil {
		for k := range nem.enabled {
			nem.min[k] = n
		}
		return nil
	}
	for _, kv := range strings.Split(ch.cfg.minFaults, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return fmt.Errorf("-min-faults: %q is not kind=n", kv)
		}
		if !nem.enabled[k] && n > 0 {
			return fmt.Errorf("-min-faults: %s=%d, but %s is not enabled here", k, n, k)
		}
		nem.min[k] = n
	}
	return nil
}

// checkFaultCounts fails the run when it injected fewer faults of an
// enabled kind than -min-faults asks, or could not heal one: a run that
// did not do what it says proves nothing about it.
func (ch *chaos) checkFaultCounts() {
	nem := ch.nem
	var got []string
	for _, k := range faultKinds {
		if !nem.enabled[k.name] {
			continue
		}
		got = append(got, fmt.Sprintf("%s %d/%d", k.name, nem.Counts[k.name], nem.min[k.name]))
		if nem.Counts[k.name] < nem.min[k.name] {
			ch.fail("injected %d %s faults, fewer than the %d asked (-min-faults); not injected when due: %d", nem.Counts[k.name], k.name, nem.min[k.name], nem.Skipped[k.name])
		}
	}
	ch.facts = append(ch.facts, "faults injected (of the minimum asked): "+strings.Join(got, ", "))
	for _, e := range nem.healErrors {
		ch.fail("the nemesis could not heal a fault: %s", e)
	}
}

// wants: the -faults list names kind (or is all).
func (cfg config) wants(kind string) bool {
	return cfg.faults == "all" || slices.Contains(strings.Split(cfg.faults, ","), kind)
}

// disarms are the times the agents logged a NOSPACE disarm.
func (ch *chaos) disarms() []time.Time {
	var out []time.Time
	if ch.c == nil {
		return nil
	}
	for _, m := range ch.c.Members {
		b, err := os.ReadFile(ch.c.LogPath(m.Name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `"msg":"NOSPACE: disarmed`) {
				continue
			}
			var rec struct {
				TS string `json:"ts"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", rec.TS); err == nil {
				out = append(out, at)
			}
		}
	}
	return out
}
