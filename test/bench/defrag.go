package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// The defrag scenario (issue 21 §4, issue 30 §4d): three members whose
// db files are about cfg.defragMB each with more than half of them free,
// steady writers that are clients of the whole cluster (see clientKind),
// and the same cluster defragmented three ways in the same run: by
// etcdkeeper offline (`etcdkeeper defrag --yes` with the spec's default
// maintenance.defrag.offline: each member's own agent stops its etcd,
// rewrites its db and starts it, one at a time, the leader's leadership
// handed off first), by etcdkeeper online (the same with offline: false:
// the lock holder calls etcd's Defragment on the member), and as an
// operator does it today (`etcdctl defrag --cluster`: every member in
// turn, in the member list's order, the leader in place). Between two
// procedures the db is made fragmented again the same way. The order
// rotates between runs. Each member's gRPC health and snap dir are
// watched meanwhile (memberWatch): its NOT_SERVING span is its online
// defragmentation.

// defragSpec is the spec's maintenance section for the etcdkeeper
// procedures: the agents do not defragment by themselves (the bench times
// each defragmentation from its start); the command ignores enabled and
// keeps the thresholds, which the smoke size would not reach by default.
func defragSpec(offline bool) string {
	return fmt.Sprintf("maintenance:\n  defrag:\n    enabled: false\n    minFreeBytes: 4MiB\n    offline: %v\n", offline)
}

// defragValue is the value size of the fill: few, large puts build the db
// fast (1 GB is 4096 puts; etcd's request limit is 1.5 MiB).
const defragValue = 256 << 10

// The clients of the scenario: each writer is one clientv3 over all three
// endpoints, as kube-apiserver is configured with --etcd-servers (or any
// application with a list of endpoints), of one of two kinds side by
// side: clientv3 as it comes (round robin over the endpoints, no health
// checking: what kube-apiserver runs today) and clientv3 with gRPC's
// client-side health checking (cluster.HealthChecking, the agents' own
// clients), which sends nothing to a member whose health says NOT_SERVING
// (every member here runs with StopGRPCServiceOnDefrag, etcdkeeper's
// default).
type clientKind int

const (
	plainClient clientKind = iota
	healthClient
	kinds
)

func (k clientKind) String() string {
	if k == healthClient {
		return "health-checking clientv3"
	}
	return "plain clientv3"
}

// writersPerKind: three writers of each kind (300 puts/s in all), so
// that "no put succeeded" is about the cluster rather than one put.
const writersPerKind = 3

// defragRun is what the writers saw during one defragmentation of the
// cluster, by client kind, and what it did to the members.
type defragRun struct {
	D    time.Duration
	Kind [kinds]kindRun
	// AnyStall is the longest time no writer of either kind succeeded:
	// the cluster took no write from anyone.
	AnyStall time.Duration
	Before   int64   // the largest db file before, bytes
	After    int64   // ... and after
	FreeFrac float64 // the smallest free share of a db before
	Members  []memberRun
	Steps    []string // what the procedure did, from its start
	handoffs []time.Time
}

// kindRun is what one kind of client saw.
type kindRun struct {
	W       writes
	Longest time.Duration // the longest single put
	Stall   time.Duration // the longest time no put of this kind succeeded
	StallAt time.Duration // ... from this long after the procedure's start
	Fails   []failedWrite
}

// failedWrite is one put that failed: when (from the procedure's start),
// the member it went to, whether that member was being defragmented
// meanwhile, and etcd's or the client's error.
type failedWrite struct {
	At         time.Duration
	Member     string
	Defragging bool
	// Handoff: the procedure reported a leader hand-off done while the
	// put was under way.
	Handoff bool
	Err     string
}

// memberRun is one member during the procedure: how long it said
// NOT_SERVING (its defragmentation) and the longest time within that in
// which its member/snap dir's byte count did not change. The agent's
// silent-member rule counts an etcd that answers nothing as stuck only
// after reconcile.ReadyDeadline (90 s) without a change there.
type memberRun struct {
	Name       string
	WasLeader  bool
	NotServing time.Duration
	Unchanged  time.Duration
}

// defragClient is a writer's client of kind k over every member.
func defragClient(r testbed.TB, c *testbed.Cluster, k clientKind) *clientv3.Client {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL())
	}
	opts := []grpc.DialOption{grpc.WithChainUnaryInterceptor(peerRecorder)}
	if k == healthClient {
		opts = append(cluster.HealthChecking(), opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), DialOptions: opts})
	must(r, err)
	r.Cleanup(func() { cli.Close() })
	return cli
}

// The procedures of the scenario, by name in the table.
const (
	offlineName = "etcdkeeper defrag --yes, offline (the member's agent stops etcd, rewrites the db, starts it; followers first, leader handed off)"
	onlineName  = "etcdkeeper defrag --yes, online (offline: false; followers first, leader handed off)"
	naiveName   = "etcdctl defrag --cluster (member list order, leader in place)"
)

func (b *bench) defragScenario() {
	procs := []procRuns{{name: offlineName}, {name: onlineName}, {name: naiveName}}
	total := int64(b.cfg.defragMB) << 20
	b.scenario("defrag", func(r *testbed.Runner) {
		c := newCluster(r, 3)
		c.Extra = defragSpec(true)
		c.WriteSpec()
		startAll(c, c.AllNames()...)
		wait(r, c.Client(), "3 healthy voters", healthy(c.AllNames()...))
		cli := c.Client()
		var w [kinds]writers
		for k := range kinds {
			for i := range writersPerKind {
				w[k] = append(w[k], startWriter(defragClient(r, c, k), fmt.Sprintf("/bench/w/%d-%d", k, i)))
			}
		}
		defer func() {
			for k := range kinds {
				w[k].Stop()
			}
		}()
		do := []func() []step{
			func() []step { applySpec(r, c, defragSpec(true)); return nil },
			func() []step { applySpec(r, c, defragSpec(false)); return nil },
			nil,
		}
		for i := 0; i < b.cfg.defragRuns; i++ {
			for k := range procs {
				p := (i + k) % len(procs)
				if do[p] != nil {
					do[p]()
				}
				fragment(r, b, c, cli, total)
				run := func() []step { return defragOurs(r, c) }
				if procs[p].name == naiveName {
					run = func() []step { return defragCluster(r, c, cli) }
				}
				procs[p].runs = append(procs[p].runs, timeDefrag(r, c, cli, w, run))
				last := procs[p].runs[len(procs[p].runs)-1]
				b.say("defrag run %d: %s %s; %s", i+1, procs[p].name, ms(last.D), last.summary())
			}
		}
	})
	b.mu.Lock()
	b.defrag = append(b.defrag, defragRows{size: fmt.Sprintf("%d MB", b.cfg.defragMB), procs: procs})
	b.mu.Unlock()
}

// applySpec writes the spec with extra and waits until every agent has
// applied it (its log says so with the new generation).
func applySpec(r testbed.TB, c *testbed.Cluster, extra string) {
	if c.Extra == extra {
		return // in force already: no agent logs it again
	}
	c.Extra = extra
	c.WriteSpec()
	gen := fmt.Sprintf("%x", sha256.Sum256([]byte(c.SpecText())))[:12]
	for _, n := range c.AllNames() {
		testbed.Eventually(r, converge, n+" applies spec generation "+gen, func() string {
			if !c.LogContains(n, "spec applied", `"to":"`+gen+`"`) {
				return "not applied"
			}
			return ""
		})
	}
}

// summary is one run for the progress log: each kind's figures and every
// failed write, and each member's NOT_SERVING time and unchanged snap dir.
func (d defragRun) summary() string {
	var parts []string
	for k := range kinds {
		x := d.Kind[k]
		p := fmt.Sprintf("%s: longest put %s, no put for %s (from +%s), p99 %s, %d/%d failed", clientKind(k), ms(x.Longest), ms(x.Stall), ms(x.StallAt), ms(x.W.P99), x.W.Failed, x.W.OK+x.W.Failed)
		for _, f := range x.Fails {
			p += fmt.Sprintf(" [+%s %s%s%s: %s]", ms(f.At), f.Member, map[bool]string{true: " (defragmenting)"}[f.Defragging], map[bool]string{true: " (hand-off meanwhile)"}[f.Handoff], f.Err)
		}
		parts = append(parts, p)
	}
	for _, m := range d.Members {
		parts = append(parts, fmt.Sprintf("%s NOT_SERVING %s, snap dir unchanged at most %s", m.label(), ms(m.NotServing), ms(m.Unchanged)))
	}
	parts = append(parts, "no put by any writer for "+ms(d.AnyStall), "steps: "+strings.Join(d.Steps, ", "))
	return strings.Join(parts, "; ")
}

func (m memberRun) label() string {
	if m.WasLeader {
		return m.Name + " (the leader)"
	}
	return m.Name
}

// fragment fills the cluster to about total bytes of db, then deletes
// new keys until at most 40 % of total is in use, and compacts: the
// deleted values' pages go back to bbolt's free list once the compaction
// has removed their revisions, and each db file keeps its size.
func fragment(r testbed.TB, b *bench, c *testbed.Cluster, cli *clientv3.Client, total int64) {
	t0 := time.Now()
	_, o := wait(r, cli, "3 healthy voters", healthy(c.AllNames()...))
	var inUse int64
	for _, m := range o.Members {
		inUse = max(inUse, m.DBSizeInUse)
	}
	prefix := fmt.Sprintf("/bench/frag/%d", time.Now().UnixNano())
	n := int(max(total-inUse, total/2) / defragValue)
	putMany(r, cli, prefix, n, defragValue)
	// Delete d of the n new keys, spread over them: afterwards at most
	// 40 % of total is in use.
	d := min(n, int((inUse+int64(n)*defragValue-total*4/10+defragValue-1)/defragValue))
	// Deadlines per call: at 1 GB on a loaded machine the deletes took
	// over a minute together, and a physical compaction of 1 GB can too.
	for k := 0; k < d; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := cli.Delete(ctx, fmt.Sprintf("%s/%08d", prefix, k*n/d))
		cancel()
		if err != nil {
			r.Fatalf("deleting: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	resp, err := cli.Get(ctx, "/bench/none")
	must(r, err)
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		r.Fatalf("compacting: %v", err)
	}
	_, o = wait(r, cli, "every db more than half free", func(o testbed.Observation) string {
		if _, why := o.ExactVoters(c.AllNames()...); why != "" {
			return why
		}
		for _, m := range o.Members {
			if m.DBSize == 0 || float64(m.DBSize-m.DBSizeInUse)/float64(m.DBSize) < 0.5 {
				return fmt.Sprintf("%s: db %d MB, %d MB in use", m.Name, m.DBSize>>20, m.DBSizeInUse>>20)
			}
		}
		return ""
	})
	b.say("defrag: db %s after %s", dbSizes(o), time.Since(t0).Round(time.Second))
}

// putMany writes n values of size bytes under prefix through 8 concurrent
// clients' requests.
func putMany(r testbed.TB, cli *clientv3.Client, prefix string, n, size int) {
	val := strings.Repeat("x", size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	next := make(chan int)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s/%08d", prefix, i), val)
				cancel()
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if failed != nil {
		r.Fatalf("filling the db: %v", failed)
	}
}

func dbSizes(o testbed.Observation) string {
	var parts []string
	for _, m := range o.Members {
		parts = append(parts, fmt.Sprintf("%s %d MB (%d MB in use)", m.Name, m.DBSize>>20, m.DBSizeInUse>>20))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// timeDefrag runs do (which defragments every member) and what the
// writers and the members' watches saw meanwhile; every db must have
// shrunk by then.
func timeDefrag(r testbed.TB, c *testbed.Cluster, cli *clientv3.Client, w [kinds]writers, do func() []step) defragRun {
	steady()
	_, o := wait(r, cli, "3 healthy voters", healthy(c.AllNames()...))
	run := defragRun{FreeFrac: 1}
	for _, m := range o.Members {
		run.Before = max(run.Before, m.DBSize)
		run.FreeFrac = min(run.FreeFrac, float64(m.DBSize-m.DBSizeInUse)/float64(m.DBSize))
	}
	mw := watchMembers(c)
	testbed.Eventually(r, converge, "every member's health SERVING", func() string {
		if mw.serving(c.AllNames()) {
			return ""
		}
		return "not yet"
	})
	t0 := time.Now()
	steps := do()
	end := time.Now()
	run.D = end.Sub(t0)
	for _, s := range steps {
		run.Steps = append(run.Steps, fmt.Sprintf("+%s %s", ms(s.at.Sub(t0)), s.what))
		if strings.Contains(s.what, "changed membership: move-leader") {
			run.handoffs = append(run.handoffs, s.at)
		}
	}
	// A put begun before the end may still be under way: wait out its
	// deadline before reading the window.
	time.Sleep(writeTimeout + writeEvery)
	mw.Stop()
	names := peerNames(c)
	for k := range kinds {
		run.Kind[k] = w[k].during(t0, end, names, mw, run.handoffs)
	}
	run.AnyStall, _ = append(w[plainClient], w[healthClient]...).longestStall(t0, end)
	for _, m := range c.Members {
		spans := mw.notServing(m.Name, end)
		mr := memberRun{Name: m.Name, WasLeader: o.ID(m.Name) == o.Leader(), Unchanged: mw.unchanged(m.Name, spans)}
		for _, s := range spans {
			mr.NotServing += s.to.Sub(s.from)
		}
		run.Members = append(run.Members, mr)
	}
	_, o = wait(r, cli, "3 healthy voters after the defragmentation", healthy(c.AllNames()...))
	for _, m := range o.Members {
		run.After = max(run.After, m.DBSize)
		if float64(m.DBSize) > 0.8*float64(run.Before) {
			r.Errorf("%s was not defragmented: db %d MB (before: up to %d MB)", m.Name, m.DBSize>>20, run.Before>>20)
		}
	}
	return run
}

// peerNames maps a member's client address (host:port) to its name.
func peerNames(c *testbed.Cluster) map[string]string {
	out := map[string]string{}
	for _, m := range c.Members {
		if u, err := url.Parse(m.ClientURL()); err == nil {
			out[u.Host] = m.Name
		}
	}
	return out
}

// step is one line a procedure printed (or, for etcdctl's, one call it
// began), stamped when it came.
type step struct {
	at   time.Time
	what string
}

// defragOurs runs `etcdkeeper defrag --yes` (a request the agents carry
// out) and stamps each line it prints ("node1: changed membership:
// move-leader ...", "node2: defragmented node3: ...").
func defragOurs(r testbed.TB, c *testbed.Cluster) []step {
	cmd := exec.Command(testbed.Binary, "defrag", "--config", c.Spec, "--yes")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	must(r, err)
	must(r, cmd.Start())
	var steps []step
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		steps = append(steps, step{at: time.Now(), what: sc.Text()})
	}
	if err := cmd.Wait(); err != nil {
		r.Fatalf("etcdkeeper defrag --yes: %v\n%v\n%s", err, steps, stderr.String())
	}
	return steps
}

// defragCluster does exactly what `etcdctl defrag --cluster` does
// (etcdctl/ctlv3/command/defrag_command.go at v3.7.3: the endpoints from
// MemberList, then Defragment on each in turn): the leader in place, no
// hand-off. etcdctl's --command-timeout (5 s by default) would cut a large
// db's call short; an operator raises it, as the deadline here does.
func defragCluster(r testbed.TB, c *testbed.Cluster, cli *clientv3.Client) []step {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	must(r, err)
	var steps []step
	for _, m := range ml.Members {
		for _, ep := range m.ClientURLs {
			steps = append(steps, step{at: time.Now(), what: "defragmenting " + m.Name})
			if _, err := cli.Defragment(ctx, ep); err != nil {
				r.Fatalf("defragment %s: %v", ep, err)
			}
		}
	}
	return steps
}

// writers are the writers of one client kind.
type writers []*writer

func (ws writers) Stop() {
	for _, w := range ws {
		w.Stop()
	}
}

// during is what the writers saw of the puts begun in [from, to]; names
// maps a put's peer to its member.
func (ws writers) during(from, to time.Time, names map[string]string, mw *memberWatch, handoffs []time.Time) kindRun {
	out := kindRun{W: ws.window(from, to)}
	out.Stall, out.StallAt = ws.longestStall(from, to)
	for _, w := range ws {
		w.mu.Lock()
		recs := append([]write(nil), w.recs...)
		w.mu.Unlock()
		for _, rec := range recs {
			if rec.at.Before(from) || rec.at.After(to) {
				continue
			}
			out.Longest = max(out.Longest, rec.dur)
			if rec.err == nil {
				continue
			}
			f := failedWrite{At: rec.at.Sub(from), Member: names[rec.peer], Err: shortErr(rec.err)}
			if f.Member == "" {
				f.Member = "no member (not sent)"
			} else {
				f.Defragging = mw.defragging(f.Member, rec.at, rec.at.Add(rec.dur))
			}
			f.Handoff = slices.ContainsFunc(handoffs, func(h time.Time) bool { return !h.Before(rec.at) && !h.After(rec.at.Add(rec.dur)) })
			out.Fails = append(out.Fails, f)
		}
	}
	sort.Slice(out.Fails, func(i, j int) bool { return out.Fails[i].At < out.Fails[j].At })
	return out
}

// shortErr is etcd's or gRPC's message without the "rpc error: code = ..."
// prefix.
func shortErr(err error) string {
	s := err.Error()
	if _, desc, ok := strings.Cut(s, "desc = "); ok {
		s = desc
	}
	return s
}

// window sums what every writer saw in [from, to]; P99 over all puts.
func (ws writers) window(from, to time.Time) writes {
	var out writes
	var lat []time.Duration
	for _, w := range ws {
		x := w.window(from, to)
		out.OK += x.OK
		out.Failed += x.Failed
		if x.LastErr != "" {
			out.LastErr = x.LastErr
		}
		w.mu.Lock()
		for _, r := range w.recs {
			if !r.at.Before(from) && !r.at.After(to) {
				lat = append(lat, r.dur)
			}
		}
		w.mu.Unlock()
	}
	out.P99 = percentile(lat, 0.99)
	return out
}

// longestStall is the longest time within [from, to] during which no
// writer's put succeeded, and when it began (from from).
func (ws writers) longestStall(from, to time.Time) (time.Duration, time.Duration) {
	var ends []time.Time
	for _, w := range ws {
		ends = append(ends, w.successes()...)
	}
	return longestGap(ends, from, to)
}

// successes are the ends of the writer's successful puts.
func (w *writer) successes() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ends []time.Time
	for _, r := range w.recs {
		if r.err == nil {
			ends = append(ends, r.at.Add(r.dur))
		}
	}
	return ends
}

// longestGap is the longest gap between consecutive times of ends that
// fall in [from, to], from and to counted as the gap's bounds at either
// side, and how long after from it began.
func longestGap(ends []time.Time, from, to time.Time) (time.Duration, time.Duration) {
	s := append([]time.Time(nil), ends...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	prev := from
	var worst, at time.Duration
	gap := func(t time.Time) {
		if d := t.Sub(prev); d > worst {
			worst, at = d, prev.Sub(from)
		}
	}
	for _, t := range s {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		gap(t)
		prev = t
	}
	gap(to)
	return worst, at
}

type defragRows struct {
	size  string
	procs []procRuns
}

// procRuns are the runs of one procedure.
type procRuns struct {
	name string
	runs []defragRun
}

// defragTable: per procedure and client kind, the writes; then per
// procedure and member, its defragmentation and its snap dir.
func (b *bench) defragTable() string {
	if len(b.defrag) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ndefragmentation of all 3 members, db files more than half free (compacted); writers of two kinds side by side, %d of each, each one clientv3 over all 3 endpoints (1 put / %s, a single attempt with a %s deadline): plain (round robin, as kube-apiserver) and health-checking (gRPC healthCheckConfig; every member runs with StopGRPCServiceOnDefrag); worst of the runs. No put for: the longest time no put of that kind succeeded\n\n", writersPerKind, writeEvery, writeTimeout)
	head := []string{"db", "procedure", "clients", "runs", "db before → after (largest)", "took", "longest put", "p99", "no put for", "failed writes", "target", "met"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, d := range b.defrag {
		for _, p := range d.procs {
			for k := range kinds {
				o := worstDefrag(p.runs, k)
				target, met := "no put for ≤ 1 s, 0 failed", "—"
				if p.name == naiveName {
					target = "—"
				} else if len(p.runs) > 0 {
					met = fmt.Sprintf("%s, %s", yesNo(o.Stall <= time.Second), yesNo(o.W.Failed == 0))
				}
				fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", d.size, p.name, clientKind(k), defragCells(p.runs, o), target, met)
			}
		}
		for _, p := range d.procs {
			var any time.Duration
			for _, r := range p.runs {
				any = max(any, r.AnyStall)
			}
			fmt.Fprintf(&sb, "| %s | %s | either kind: no put by any writer | %d | — | — | — | — | %s | — | — | — |\n", d.size, p.name, len(p.runs), ms(any))
		}
	}
	fmt.Fprintf(&sb, "\neach member while it was defragmented online (its health NOT_SERVING), worst of the runs; snap dir unchanged: the longest time its member/snap dir's byte count did not change (sampled every %s), against the %s after which the agent takes an etcd that answers nothing and shows no such change for stuck\n\n", snapEvery, reconcile.ReadyDeadline)
	fmt.Fprintf(&sb, "| db | procedure | member | NOT_SERVING for | snap dir unchanged at most |\n|---|---|---|---|---|\n")
	for _, d := range b.defrag {
		for _, p := range d.procs {
			if p.name == offlineName {
				continue // a stopped member has no health to watch
			}
			for _, m := range worstMembers(p.runs) {
				fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", d.size, p.name, m.label(), ms(m.NotServing), ms(m.Unchanged))
			}
		}
	}
	return sb.String()
}

// worstDefrag: kind k's largest stall, longest put, p99, duration and
// sizes over the runs, the failed writes summed.
func worstDefrag(rs []defragRun, k clientKind) kindRunOver {
	w := kindRunOver{FreeFrac: 1}
	for _, r := range rs {
		x := r.Kind[k]
		w.D, w.Before, w.After = max(w.D, r.D), max(w.Before, r.Before), max(w.After, r.After)
		w.FreeFrac = min(w.FreeFrac, r.FreeFrac)
		w.Stall, w.Longest = max(w.Stall, x.Stall), max(w.Longest, x.Longest)
		w.W.P99 = max(w.W.P99, x.W.P99)
		w.W.Failed += x.W.Failed
		w.W.OK += x.W.OK
		w.Fails = append(w.Fails, x.Fails...)
	}
	return w
}

// kindRunOver is one kind's figures over the runs.
type kindRunOver struct {
	kindRun
	D             time.Duration
	Before, After int64
	FreeFrac      float64
}

// worstMembers: each member's longest NOT_SERVING and unchanged snap dir
// over the runs (the leader: the one that was at the start of a run).
func worstMembers(rs []defragRun) []memberRun {
	var out []memberRun
	for _, r := range rs {
		for _, m := range r.Members {
			i := slices.IndexFunc(out, func(x memberRun) bool { return x.Name == m.Name })
			if i < 0 {
				out = append(out, memberRun{Name: m.Name})
				i = len(out) - 1
			}
			out[i].WasLeader = out[i].WasLeader || m.WasLeader
			out[i].NotServing, out[i].Unchanged = max(out[i].NotServing, m.NotServing), max(out[i].Unchanged, m.Unchanged)
		}
	}
	return out
}

func defragCells(rs []defragRun, w kindRunOver) string {
	if len(rs) == 0 {
		return "0 | no run | — | — | — | — | —"
	}
	return fmt.Sprintf("%d | %d MB (≥ %.0f%% free) → %d MB | %s | %s | %s | %s | %s", len(rs), w.Before>>20, w.FreeFrac*100, w.After>>20,
		ms(w.D), ms(w.Longest), msShort(w.W.P99), ms(w.Stall), failedCell(w))
}

// failedCell: failed/total, and where they went: to the member being
// defragmented (held until the deadline), or elsewhere with their error.
func failedCell(w kindRunOver) string {
	cell := fmt.Sprintf("%d/%d", w.W.Failed, w.W.Failed+w.W.OK)
	if len(w.Fails) == 0 {
		return cell
	}
	counts := map[string]int{}
	var causes []string
	for _, f := range w.Fails {
		var cause string
		switch {
		case f.Defragging:
			cause = "to the member being defragmented"
		case f.Handoff:
			cause = fmt.Sprintf("in flight at the leader hand-off (%s)", f.Err)
		default:
			cause = fmt.Sprintf("%s at %s", f.Err, f.Member)
		}
		if counts[cause] == 0 {
			causes = append(causes, cause)
		}
		counts[cause]++
	}
	var parts []string
	for _, c := range causes {
		parts = append(parts, fmt.Sprintf("%d %s", counts[c], c))
	}
	return cell + " (" + strings.Join(parts, "; ") + ")"
}
