package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// The marks of an agent's repair in its own log, in order: each is the
// time from "agent starting" to that line (the first one after the last
// start). A scripted repair has its own "added", "etcd started", "etcd
// answers" (the new member's first status answer) and "promoted", from
// the script's start (manualRepair). Between the start and the lock: the inspection of the old data
// and the decision; snapshot: the safety snapshot kept; add: the member
// removed, its data moved aside and added back as a learner; etcd
// started; etcd answers (its first status answer, as a learner);
// promoted.
var stepMarks = []struct{ name, msg, step string }{
	{"lock taken", "cluster lock taken", ""},
	{"rejoin started", "rejoin started", ""},
	{"snapshot kept", "rejoin step", "snapshot"},
	{"added", "rejoin step", "add"},
	{"etcd started", "etcd started", ""},
	{"etcd answers", "member identity recorded", ""},
	{"promoted", "promoted to voter", ""},
}

// repairSteps reads the marks of the last repair from an agent's log.
func repairSteps(logPath string) map[string]time.Duration {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.Contains(l, `"msg":"agent starting"`) {
			start = i
		}
	}
	if start < 0 {
		return nil
	}
	type rec struct {
		TS   string `json:"ts"`
		Msg  string `json:"msg"`
		Step string `json:"step"`
	}
	var t0 time.Time
	out := map[string]time.Duration{}
	for _, l := range lines[start:] {
		var r rec
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, r.TS)
		if err != nil {
			continue
		}
		if r.Msg == "agent starting" {
			t0 = ts
			continue
		}
		for _, m := range stepMarks {
			if _, seen := out[m.name]; !seen && r.Msg == m.msg && (m.step == "" || r.Step == m.step) {
				out[m.name] = ts.Sub(t0)
			}
		}
	}
	return out
}

// stepsTable is the per-step breakdown of the agents' repairs: the median
// of each mark over the runs the stall spared.
func (b *bench) stepsTable() string {
	if len(b.steps) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nwhere an agent's repair spends its time (its own log, from \"agent starting\"; medians of the runs without a stall or restart), and the scripted repair's own marks (from its start):\n\n")
	head := []string{"repair"}
	for _, m := range stepMarks {
		head = append(head, m.name)
	}
	head = append(head, "scripted, whole procedure")
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, s := range b.steps {
		fmt.Fprintf(&sb, "| %s |\n", strings.Join(s.cells(), " | "))
		if sc := s.scriptCells(); sc != nil {
			fmt.Fprintf(&sb, "| %s |\n", strings.Join(sc, " | "))
		}
	}
	return sb.String()
}

type repairBreakdown struct {
	size string
	// runs are the marks of the agent's repairs that neither stalled nor
	// had their etcd restarted; all, of every one.
	runs, all []map[string]time.Duration
	script    []event
}

// cells is one row of the steps table: the median of each mark over the
// runs, "—" for a mark no run reached, and the scripted repairs' median
// over the runs the stall spared. A row with no spared run says so, and
// shows the medians of all the runs when there are any (at 1 GB on a
// loaded machine every run hits etcd's publish stall), or "—".
func (s repairBreakdown) cells() []string {
	cells := []string{fmt.Sprintf("%s (%d runs)", s.size, len(s.runs))}
	runs := s.runs
	switch {
	case len(s.runs) == 0 && len(s.all) > 0:
		cells[0] = fmt.Sprintf("%s (all %d runs hit etcd's publish stall or had their etcd restarted: medians of them all)", s.size, len(s.all))
		runs = s.all
	case len(s.runs) == 0:
		cells[0] = fmt.Sprintf("%s (0 runs: every run hit etcd's publish stall or had its etcd restarted)", s.size)
	}
	cells = append(cells, markCells(runs)...)
	script := "—"
	if ok := unstalled(s.script); len(ok) > 0 {
		script = ms(median(ok))
		if len(ok) < len(s.script) {
			script += fmt.Sprintf(" (%d of %d runs without the stall)", len(ok), len(s.script))
		}
	} else if len(s.script) > 0 {
		script = fmt.Sprintf("— (all %d runs hit etcd's publish stall; with it: %s)", len(s.script), ms(median(s.script)))
	}
	return append(cells, script)
}

// scriptCells is the row of the scripted repairs' own marks (member
// added, etcd started, its first answer, promoted; from the script's
// start), over the runs the stall spared, else over all of them; nil
// without scripted runs that have marks.
func (s repairBreakdown) scriptCells() []string {
	var spared, all []map[string]time.Duration
	for _, e := range s.script {
		if e.Steps == nil {
			continue
		}
		all = append(all, e.Steps)
		if !e.Stalled {
			spared = append(spared, e.Steps)
		}
	}
	if len(all) == 0 {
		return nil
	}
	label := fmt.Sprintf("%s, scripted (%d runs)", s.size, len(spared))
	runs := spared
	if len(spared) == 0 {
		label = fmt.Sprintf("%s, scripted (all %d runs hit etcd's publish stall: medians of them all)", s.size, len(all))
		runs = all
	}
	return append(append([]string{label}, markCells(runs)...), "")
}

// markCells are the medians of each mark over runs, "—" for a mark none
// reached.
func markCells(runs []map[string]time.Duration) []string {
	var cells []string
	for _, m := range stepMarks {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r[m.name]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			cells = append(cells, "—")
			continue
		}
		cells = append(cells, "+"+ms(medianD(ds)))
	}
	return cells
}

// fmtSteps is one run's marks for the progress log.
func fmtSteps(m map[string]time.Duration) string {
	var parts []string
	for _, s := range stepMarks {
		if d, ok := m[s.name]; ok {
			parts = append(parts, fmt.Sprintf("%s +%s", s.name, ms(d)))
		}
	}
	return strings.Join(parts, ", ")
}
