package main

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// The defrag scenario (issue 21 §4): three members whose db files are
// about cfg.defragMB each with more than half of them free, a steady
// writer through every member, and the same cluster defragmented two
// ways in the same run: by etcdkeeper (`etcdkeeper defrag --yes`: one
// member at a time, followers first, the leader's leadership handed off
// before it is defragmented as a follower) and as an operator does it
// today (`etcdctl defrag --cluster`: every member in turn, in the member
// list's order, the leader in place). Between the two the db is made
// fragmented again the same way. The order alternates between runs.

// defragSpec: the agents do not defragment by themselves (the bench times
// each defragmentation from its start); the command ignores enabled and
// keeps the thresholds, which the smoke size would not reach by default.
const defragSpec = "maintenance:\n  defrag:\n    enabled: false\n    minFreeBytes: 4MiB\n"

// defragValue is the value size of the fill: few, large puts build the db
// fast (1 GB is 4096 puts; etcd's request limit is 1.5 MiB).
const defragValue = 256 << 10

// defragRun is what the writer saw during one defragmentation of the
// cluster, and what it did to the db files.
type defragRun struct {
	D        time.Duration
	W        writes
	Stall    time.Duration // the longest time no writer's put succeeded
	Each     time.Duration // the longest time one writer's puts did not succeed
	Before   int64         // the largest db file before, bytes
	After    int64         // ... and after
	FreeFrac float64       // the smallest free share of a db before
}

func (b *bench) defragScenario() {
	var mine, naive []defragRun
	total := int64(b.cfg.defragMB) << 20
	b.scenario("defrag", func(r *testbed.Runner) {
		c := newCluster(r, 3)
		c.Extra = defragSpec
		c.WriteSpec()
		startAll(c, c.AllNames()...)
		wait(r, c.Client(), "3 healthy voters", healthy(c.AllNames()...))
		cli := c.Client()
		// A steady writer through every member: one per member, each
		// pinned to that member's endpoint.
		var w writers
		for _, n := range c.AllNames() {
			w = append(w, startWriter(c.Client(n), "/bench/w/"+n))
		}
		defer w.Stop()
		for i := 0; i < b.cfg.defragRuns; i++ {
			a := func() {
				fragment(r, b, c, cli, total)
				mine = append(mine, timeDefrag(r, c, cli, w, func() { defragOurs(r, c) }))
			}
			m := func() {
				fragment(r, b, c, cli, total)
				naive = append(naive, timeDefrag(r, c, cli, w, func() { defragCluster(r, c, cli) }))
			}
			order := []func(){a, m}
			for k := range order {
				order[(i+k)%len(order)]()
			}
			b.say("defrag run %d: etcdkeeper %s, longest stall %s (one writer %s), p99 %s, %d/%d failed; etcdctl defrag --cluster %s, longest stall %s (one writer %s), p99 %s, %d/%d failed",
				i+1, ms(mine[i].D), ms(mine[i].Stall), ms(mine[i].Each), ms(mine[i].W.P99), mine[i].W.Failed, mine[i].W.OK+mine[i].W.Failed,
				ms(naive[i].D), ms(naive[i].Stall), ms(naive[i].Each), ms(naive[i].W.P99), naive[i].W.Failed, naive[i].W.OK+naive[i].W.Failed)
		}
	})
	b.mu.Lock()
	b.defrag = append(b.defrag, defragRows{size: fmt.Sprintf("%d MB", b.cfg.defragMB), ours: mine, naive: naive})
	b.mu.Unlock()
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := 0; k < d; k++ {
		if _, err := cli.Delete(ctx, fmt.Sprintf("%s/%08d", prefix, k*n/d)); err != nil {
			r.Fatalf("deleting: %v", err)
		}
	}
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

// timeDefrag runs do (which defragments every member) and what the writer
// saw meanwhile; every db must have shrunk by then.
func timeDefrag(r testbed.TB, c *testbed.Cluster, cli *clientv3.Client, w writers, do func()) defragRun {
	steady()
	_, o := wait(r, cli, "3 healthy voters", healthy(c.AllNames()...))
	run := defragRun{FreeFrac: 1}
	for _, m := range o.Members {
		run.Before = max(run.Before, m.DBSize)
		run.FreeFrac = min(run.FreeFrac, float64(m.DBSize-m.DBSizeInUse)/float64(m.DBSize))
	}
	t0 := time.Now()
	do()
	end := time.Now()
	run.D = end.Sub(t0)
	// A put begun before the end may still be under way: wait out its
	// deadline before reading the window.
	time.Sleep(writeTimeout + writeEvery)
	run.W = w.window(t0, end)
	run.Stall = w.longestStall(t0, end)
	run.Each = w.worstEach(t0, end)
	_, o = wait(r, cli, "3 healthy voters after the defragmentation", healthy(c.AllNames()...))
	for _, m := range o.Members {
		run.After = max(run.After, m.DBSize)
		if float64(m.DBSize) > 0.8*float64(run.Before) {
			r.Errorf("%s was not defragmented: db %d MB (before: up to %d MB)", m.Name, m.DBSize>>20, run.Before>>20)
		}
	}
	return run
}

// defragOurs runs `etcdkeeper defrag --yes`: the agents' procedure.
func defragOurs(r testbed.TB, c *testbed.Cluster) {
	cmd := exec.Command(testbed.Binary, "defrag", "--config", c.Spec, "--yes")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.Fatalf("etcdkeeper defrag --yes: %v\n%s", err, out)
	}
}

// defragCluster does exactly what `etcdctl defrag --cluster` does
// (etcdctl/ctlv3/command/defrag_command.go at v3.7.3: the endpoints from
// MemberList, then Defragment on each in turn): the leader in place, no
// hand-off. etcdctl's --command-timeout (5 s by default) would cut a large
// db's call short; an operator raises it, as the deadline here does.
func defragCluster(r testbed.TB, c *testbed.Cluster, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	must(r, err)
	for _, m := range ml.Members {
		for _, ep := range m.ClientURLs {
			if _, err := cli.Defragment(ctx, ep); err != nil {
				r.Fatalf("defragment %s: %v", ep, err)
			}
		}
	}
}

// writers are the scenario's writers, one per member.
type writers []*writer

func (ws writers) Stop() {
	for _, w := range ws {
		w.Stop()
	}
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
// writer's put succeeded: the cluster took no write through any member.
func (ws writers) longestStall(from, to time.Time) time.Duration {
	var ends []time.Time
	for _, w := range ws {
		ends = append(ends, w.successes()...)
	}
	return longestGap(ends, from, to)
}

// worstEach is the longest such time of any one writer: what a client of
// a single member waited.
func (ws writers) worstEach(from, to time.Time) time.Duration {
	var worst time.Duration
	for _, w := range ws {
		worst = max(worst, longestGap(w.successes(), from, to))
	}
	return worst
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
// side.
func longestGap(ends []time.Time, from, to time.Time) time.Duration {
	s := append([]time.Time(nil), ends...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	prev := from
	var worst time.Duration
	for _, t := range s {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		worst = max(worst, t.Sub(prev))
		prev = t
	}
	return max(worst, to.Sub(prev))
}

type defragRows struct {
	size        string
	ours, naive []defragRun
}

// defragTable: one line per way of defragmenting, and the targets.
func (b *bench) defragTable() string {
	if len(b.defrag) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ndefragmentation of all 3 members, db files more than half free (compacted), a steady writer through every member (one per member, each pinned to its endpoint: 1 put / %s, a single attempt with a %s deadline); worst of the runs. Longest write stall: no put through any member succeeded; the longest one writer waited: the same for a client of one member\n\n", writeEvery, writeTimeout)
	head := []string{"db", "how", "runs", "db before → after (largest)", "took", "longest write stall", "the longest one writer waited", "p99", "failed writes", "target", "met"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, d := range b.defrag {
		o, n := worstDefrag(d.ours), worstDefrag(d.naive)
		target := "longest stall ≤ 1 s and ≤ 1/5 of etcdctl's, 0 failed writes"
		met := "—"
		if len(d.ours) > 0 && len(d.naive) > 0 {
			met = fmt.Sprintf("%s, %s, %s", yesNo(o.Stall <= time.Second), yesNo(o.Stall*5 <= n.Stall), yesNo(o.W.Failed == 0))
		}
		fmt.Fprintf(&sb, "| %s | etcdkeeper defrag --yes (followers first, leader handed off) | %s | %s | %s |\n", d.size, defragCells(d.ours, o), target, met)
		fmt.Fprintf(&sb, "| %s | etcdctl defrag --cluster (member list order, leader in place) | %s | — | — |\n", d.size, defragCells(d.naive, n))
	}
	return sb.String()
}

// worstDefrag: the largest stall, p99, duration and sizes over the runs,
// the failed writes summed.
func worstDefrag(rs []defragRun) defragRun {
	var w defragRun
	w.FreeFrac = 1
	for _, r := range rs {
		w.D, w.Stall, w.Before, w.After = max(w.D, r.D), max(w.Stall, r.Stall), max(w.Before, r.Before), max(w.After, r.After)
		w.Each = max(w.Each, r.Each)
		w.FreeFrac = min(w.FreeFrac, r.FreeFrac)
		w.W.P99 = max(w.W.P99, r.W.P99)
		w.W.Failed += r.W.Failed
		w.W.OK += r.W.OK
		if r.W.LastErr != "" {
			w.W.LastErr = r.W.LastErr
		}
	}
	return w
}

func defragCells(rs []defragRun, w defragRun) string {
	if len(rs) == 0 {
		return "0 | no run | — | — | — | — | —"
	}
	failed := fmt.Sprintf("%d/%d", w.W.Failed, w.W.Failed+w.W.OK)
	if w.W.LastErr != "" {
		failed += " [" + w.W.LastErr + "]"
	}
	return fmt.Sprintf("%d | %d MB (≥ %.0f%% free) → %d MB | %s | %s | %s | %s | %s", len(rs), w.Before>>20, w.FreeFrac*100, w.After>>20,
		ms(w.D), ms(w.Stall), ms(w.Each), msShort(w.W.P99), failed)
}
