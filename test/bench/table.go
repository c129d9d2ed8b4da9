package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// row is one line of the table: the agent's events, optionally a
// baseline's, and the target.
type row struct {
	what     string
	keeper   []event
	base     []event
	baseName string
	// target is the ratio keeper/base to stay under, over the runs etcd's
	// publish stall spared (all runs when it spared all); 0: none.
	// targetAll, when set, is the ratio to stay under over all runs, the
	// baseline's stalls counted.
	target, targetAll float64
	// zeroFailed: the target includes no failed write.
	zeroFailed bool
	noWriter   bool
	// text rows (idle CPU, RSS) carry their cells as they are.
	cells []string
}

func median(evs []event) time.Duration { return medianD(durations(evs)) }

// durations are the events' durations, sorted.
func durations(evs []event) []time.Duration {
	ds := make([]time.Duration, len(evs))
	for i, e := range evs {
		ds[i] = e.D
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

// medianD is the median of ds (sorted here).
func medianD(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds)%2 == 1 {
		return ds[len(ds)/2]
	}
	return (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
}

// writerCell sums the writes over the runs: failed/total, and the median
// and worst of the per-run p99 latencies.
func writerCell(evs []event) (string, int) {
	if len(evs) == 0 {
		return "", 0
	}
	failed, total := 0, 0
	var p99s []time.Duration
	last := ""
	for _, e := range evs {
		failed += e.W.Failed
		total += e.W.OK + e.W.Failed
		p99s = append(p99s, e.W.P99)
		if e.W.LastErr != "" {
			last = e.W.LastErr
		}
	}
	sort.Slice(p99s, func(i, j int) bool { return p99s[i] < p99s[j] })
	cell := fmt.Sprintf("%d/%d failed, p99 %s (worst %s)", failed, total, msShort(p99s[len(p99s)/2]), msShort(p99s[len(p99s)-1]))
	if last != "" {
		cell += fmt.Sprintf(" [%s]", last)
	}
	return cell, failed
}

func msShort(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func (r row) render() []string {
	if r.cells != nil {
		return append([]string{r.what}, r.cells...)
	}
	keeper := fmt.Sprintf("%s (n=%d)%s", ms(median(r.keeper)), len(r.keeper), stallNote(r.keeper))
	base, ratio := "—", "—"
	got, gotAll := 0.0, 0.0
	if len(r.base) > 0 {
		base = fmt.Sprintf("%s: %s%s", r.baseName, ms(median(r.base)), stallNote(r.base))
		got = float64(median(r.keeper)) / float64(median(r.base))
		gotAll = got
		ratio = fmt.Sprintf("%.2f×", got)
		// etcd's publish stall strikes both sides at random and swamps
		// the difference: compare the runs it spared, when both have some.
		k, b := unstalled(r.keeper), unstalled(r.base)
		if (len(k) < len(r.keeper) || len(b) < len(r.base)) && len(k) > 0 && len(b) > 0 {
			got = float64(median(k)) / float64(median(b))
			ratio += fmt.Sprintf(" (%.2f× without the stall)", got)
		}
	}
	kw, kfailed := writerCell(r.keeper)
	bw, bfailed := writerCell(r.base)
	writes := "—"
	if !r.noWriter {
		writes = "agent: " + kw
		if bw != "" {
			writes += "; scripted: " + bw
		}
	}
	_ = bfailed
	var targets, verdicts []string
	if r.targetAll > 0 {
		targets = append(targets, fmt.Sprintf("≤ %.1f× counting the stalls", r.targetAll))
		verdicts = append(verdicts, yesNo(gotAll <= r.targetAll))
	}
	if r.target > 0 {
		t := fmt.Sprintf("≤ %.1f×", r.target)
		if r.targetAll > 0 {
			t += " without"
		}
		targets = append(targets, t)
		verdicts = append(verdicts, yesNo(got <= r.target))
	}
	if r.zeroFailed {
		targets = append(targets, "0 failed writes")
		verdicts = append(verdicts, yesNo(kfailed == 0))
	}
	target, met := "—", "—"
	if len(targets) > 0 {
		target, met = strings.Join(targets, ", "), strings.Join(verdicts, ", ")
	}
	return []string{r.what, keeper, base, ratio, writes, target, met}
}

func unstalled(evs []event) []event {
	var out []event
	for _, e := range evs {
		if !e.Stalled {
			out = append(out, e)
		}
	}
	return out
}

// stallNote says how many runs hit etcd's 7 s publish stall, and the
// median of the others.
func stallNote(evs []event) string {
	ok := unstalled(evs)
	restarts := 0
	for _, e := range evs {
		restarts += e.Averted
	}
	note := ""
	if restarts > 0 {
		note = fmt.Sprintf("; the agent restarted %d stalled etcd", restarts)
	}
	if len(ok) == len(evs) {
		return note
	}
	if len(ok) == 0 {
		return fmt.Sprintf("; all %d runs hit etcd's publish stall", len(evs)) + note
	}
	return fmt.Sprintf("; %d hit etcd's 7 s publish stall, the other %d: %s", len(evs)-len(ok), len(ok), ms(median(ok))) + note
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (b *bench) idleRows(cpu500, cpu2s []float64, rssKB []int64) {
	maxOf := func(xs []float64) float64 {
		m := 0.0
		for _, x := range xs {
			m = max(m, x)
		}
		return m
	}
	var rss int64
	for _, x := range rssKB {
		rss = max(rss, x)
	}
	idle := fmt.Sprintf("%s idle from %s after healthy, worst of 3 agents", b.cfg.idle, b.cfg.idleSettle)
	c500, c2 := maxOf(cpu500)*100, maxOf(cpu2s)*100
	b.add(row{what: "agent idle CPU (agent process only, not etcd), agent.interval 500ms (test bed)",
		cells: []string{fmt.Sprintf("%.2f%% of a core", c500), idle, "—", "—", "≤ 0.5%", yesNo(c500 <= 0.5)}})
	b.add(row{what: "agent idle CPU, agent.interval 2s (the default)",
		cells: []string{fmt.Sprintf("%.2f%% of a core", c2), idle, "—", "—", "≤ 0.5%", yesNo(c2 <= 0.5)}})
	b.add(row{what: "agent RSS (VmRSS, agent process only)",
		cells: []string{fmt.Sprintf("%.1f MB", float64(rss)/1024), "largest sample, 1/s, 3 agents", "—", "—", "≤ 40 MB", yesNo(float64(rss)/1024 <= 40)}})
}

func (b *bench) table() string {
	var sb strings.Builder
	mode := fmt.Sprintf("%d runs per measurement", b.cfg.runs)
	if b.cfg.bigRuns != b.cfg.runs || b.cfg.recoverRuns != b.cfg.runs || b.cfg.smallRuns != b.cfg.runs {
		mode = fmt.Sprintf("%d runs per measurement, %d of the %d MB repair, %d of each repair at 100 MB and more, %d recoveries per size",
			b.cfg.runs, b.cfg.smallRuns, b.cfg.smallMB, b.cfg.bigRuns, b.cfg.recoverRuns)
	}
	if b.cfg.only != "" {
		mode += ", only " + b.cfg.only
	}
	if b.cfg.smoke {
		mode = "smoke: 1 run each, targets not asserted"
	}
	fmt.Fprintf(&sb, "etcdkeeper bench, %s (%s, took %s)\n", time.Now().Format("2006-01-02"), mode, time.Since(b.started).Round(time.Second))
	fmt.Fprintf(&sb, "machine: %s\n", machine())
	fmt.Fprintf(&sb, "times: medians, an observation started every %s (overlapping); writer: 1 put / %s through the members not disturbed, each a single attempt with a %s deadline\n\n",
		pollEvery, writeEvery, writeTimeout)
	head := []string{"measurement", "etcdkeeper (median)", "baseline (median)", "ratio", "steady writer during the event", "target", "met"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.rows {
		fmt.Fprintf(&sb, "| %s |\n", strings.Join(r.render(), " | "))
	}
	return sb.String()
}
