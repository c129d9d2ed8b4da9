package main

import (
	"strings"
	"testing"
	"time"
)

// TestStepsRow: a row of the breakdown table shows medians only of what
// ran; with no run (every one stalled or restarted) it says so, and shows
// no "+0s".
func TestStepsRow(t *testing.T) {
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	run := map[string]time.Duration{"lock taken": sec(0.1), "rejoin started": sec(0.2), "snapshot kept": sec(1), "added": sec(1.1),
		"etcd started": sec(1.2), "etcd answers": sec(2), "promoted": sec(2.1)}
	tests := []struct {
		name     string
		bd       repairBreakdown
		want     []string // substrings of the joined row
		wantNone []string
	}{
		{"runs", repairBreakdown{size: "1 GB", runs: []map[string]time.Duration{run}, script: []event{{D: sec(5)}}},
			[]string{"1 GB (1 runs)", "+100ms", "+2.1s", "| 5s"}, []string{"+0s", "—"}},
		{"no runs, every script run stalled", repairBreakdown{size: "1 GB", script: []event{{D: sec(9), Stalled: true}}},
			[]string{"1 GB (0 runs: every run hit etcd's publish stall or had its etcd restarted)", "| — |", "all 1 runs hit etcd's publish stall; with it: 9s"},
			[]string{"+0s", "| 0s"}},
		{"no spared run, stalled ones: their medians", repairBreakdown{size: "1 GB", all: []map[string]time.Duration{run}, script: []event{{D: sec(9), Stalled: true}}},
			[]string{"1 GB (all 1 runs hit etcd's publish stall or had their etcd restarted: medians of them all)", "+100ms", "+2.1s"},
			[]string{"+0s", "0 runs"}},
		{"a mark missing from every run", repairBreakdown{size: "100 MB", runs: []map[string]time.Duration{{"lock taken": sec(0.1)}},
			script: []event{{D: sec(1)}, {D: sec(8), Stalled: true}}},
			[]string{"+100ms", "| — |", "1s (1 of 2 runs without the stall)"}, []string{"+0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells := tt.bd.cells()
			if len(cells) != len(stepMarks)+2 {
				t.Fatalf("%d cells, want %d: %q", len(cells), len(stepMarks)+2, cells)
			}
			row := "| " + strings.Join(cells, " | ") + " |"
			for _, w := range tt.want {
				if !strings.Contains(row, w) {
					t.Errorf("row %s lacks %q", row, w)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(row, w) {
					t.Errorf("row %s holds %q", row, w)
				}
			}
		})
	}
}

// TestScriptStepsRow: the scripted repairs' own marks, over the runs the
// stall spared, else over all of them; no row without marks.
func TestScriptStepsRow(t *testing.T) {
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	marks := func(start, answer float64) map[string]time.Duration {
		return map[string]time.Duration{"added": sec(0.05), "etcd started": sec(start), "etcd answers": sec(answer), "promoted": sec(answer + 0.1)}
	}
	tests := []struct {
		name string
		evs  []event
		want []string // substrings of the joined row; nil: no row
	}{
		{"no marks", []event{{D: sec(5)}}, nil},
		{"a spared run and a stalled one", []event{{D: sec(5), Steps: marks(0.1, 4)}, {D: sec(12), Stalled: true, Steps: marks(0.1, 11)}},
			[]string{"1 GB, scripted (1 runs)", "| — | — | — | +50ms | +100ms | +4s | +4.1s |"}},
		{"every run stalled", []event{{D: sec(12), Stalled: true, Steps: marks(0.1, 11)}},
			[]string{"all 1 runs hit etcd's publish stall: medians of them all", "+11s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells := repairBreakdown{size: "1 GB", script: tt.evs}.scriptCells()
			if tt.want == nil {
				if cells != nil {
					t.Errorf("a row without marks: %q", cells)
				}
				return
			}
			if len(cells) != len(stepMarks)+2 {
				t.Fatalf("%d cells, want %d: %q", len(cells), len(stepMarks)+2, cells)
			}
			row := "| " + strings.Join(cells, " | ") + " |"
			for _, w := range tt.want {
				if !strings.Contains(row, w) {
					t.Errorf("row %s lacks %q", row, w)
				}
			}
		})
	}
}

// TestLongestGap: the longest time without a successful write inside a
// window, the window's ends counted as bounds.
func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	tests := []struct {
		name string
		ends []time.Time
		to   int
		want time.Duration
		from time.Duration // when the longest gap began
	}{
		{"steady", at(20, 40, 60, 80, 100), 100, 20 * time.Millisecond, 0},
		{"a stall in the middle, unsorted", at(20, 1540, 40, 1560), 1560, 1500 * time.Millisecond, 40 * time.Millisecond},
		{"nothing succeeded", nil, 3000, 3 * time.Second, 0},
		{"a stall up to the end", at(20, 40), 2040, 2 * time.Second, 40 * time.Millisecond},
		{"writes outside the window do not count", at(-500, 10, 30, 5000), 40, 20 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, from := longestGap(tt.ends, t0, t0.Add(time.Duration(tt.to)*time.Millisecond))
			if got != tt.want || from != tt.from {
				t.Errorf("longestGap = %s from +%s, want %s from +%s", got, from, tt.want, tt.from)
			}
		})
	}
}
