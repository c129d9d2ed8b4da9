package model

import (
	"strings"
	"testing"
	"time"
)

func TestCatchUpBound(t *testing.T) {
	for _, tt := range []struct{ flag, want uint64 }{
		{0, 2500},      // etcd's default 5000
		{5000, 2500},   // half of what the leader keeps for slow followers
		{100, 1000},    // never below MinCatchUpEntries
		{50000, 25000}, // a large setting widens it
	} {
		if got := CatchUpBound(tt.flag); got != tt.want {
			t.Errorf("CatchUpBound(%d) = %d, want %d", tt.flag, got, tt.want)
		}
	}
}

// TestCaughtUp is the rule, row by row; the rows that must not count are
// the point of F4 of the 2026-12-01 review.
func TestCaughtUp(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		m    Member
		want bool
		lag  string // a part of the reason
	}{
		{"level with the leader (idle cluster)", Member{Name: "n", Healthy: true}, true, ""},
		{"level with the leader, index not moving", Member{Name: "n", Healthy: true, IndexSince: since}, true, ""},
		{"a little behind and rising (under load)", Member{Name: "n", Healthy: true, Behind: 40, Rising: true, IndexSince: since}, true, ""},
		{"at the bound and rising", Member{Name: "n", Healthy: true, Behind: 1000, Rising: true}, true, ""},
		{"past the bound, rising (just healed)", Member{Name: "n", Healthy: true, Behind: 1200, Rising: true}, false, "n is catching up (index 1200 behind the leader)"},
		{"past the bound, not rising (receiving a snapshot)", Member{Name: "n", Healthy: true, Behind: 7000, IndexSince: since}, false, "7000 behind"},
		{"behind and frozen (a stuck disk)", Member{Name: "n", Healthy: true, Behind: 12, IndexSince: since}, false, "unchanged since 12:00:00"},
		{"behind, seen once", Member{Name: "n", Healthy: true, Behind: 12}, false, "not yet seen rising"},
		{"unhealthy", Member{Name: "n", Behind: 0}, false, ""},
		{"unstarted", Member{Healthy: true}, false, ""},
	}
	for _, tt := range tests {
		got, lag := CaughtUp(tt.m, 1000)
		if got != tt.want || (tt.lag == "") != (lag == "") || !strings.Contains(lag, tt.lag) {
			t.Errorf("%s: CaughtUp = %v %q, want %v %q", tt.name, got, lag, tt.want, tt.lag)
		}
	}
}

// TestProgressStamp follows three members over observations: node1 leads,
// node2 keeps up, node3 freezes (its status still answers with a leader,
// with the same index), then the cluster goes idle, then node3 comes back.
func TestProgressStamp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := Progress{}
	obs := func(at time.Duration, idx ...uint64) Cluster {
		c := Cluster{Now: t0.Add(at), LeaderID: 1}
		for i, x := range idx {
			c.Members = append(c.Members, Member{ID: uint64(i + 1), Name: "node" + string(rune('1'+i)), Healthy: true, Leader: 1, RaftIndex: x})
		}
		p.Stamp(&c, 1000)
		return c
	}
	steps := []struct {
		name string
		at   time.Duration
		idx  []uint64
		want [3]bool
	}{
		{"first look: only who is level counts", 0, []uint64{500, 490, 480}, [3]bool{true, false, false}},
		{"under load: node2 rises, node3 does not", 2 * time.Second, []uint64{600, 595, 480}, [3]bool{true, true, false}},
		{"more load: node3 still frozen", 4 * time.Second, []uint64{700, 700, 480}, [3]bool{true, true, false}},
		{"idle: level members count without moving", 6 * time.Second, []uint64{700, 700, 480}, [3]bool{true, true, false}},
		{"node3 moves again", 8 * time.Second, []uint64{700, 700, 650}, [3]bool{true, true, true}},
		{"a rise seen across a long gap says nothing", 60 * time.Second, []uint64{800, 800, 700}, [3]bool{true, true, false}},
	}
	for _, s := range steps {
		c := obs(s.at, s.idx...)
		for i, m := range c.Members {
			if m.CaughtUp != s.want[i] {
				t.Errorf("%s: %s CaughtUp = %v (%q), want %v", s.name, m.Name, m.CaughtUp, m.Lag, s.want[i])
			}
		}
	}
	c := obs(70*time.Second, 900, 900)
	if _, ok := p[3]; ok || len(p) != 2 || c.Members[1].Behind != 0 {
		t.Errorf("progress = %v, want node3 forgotten", p)
	}
}

// TestProgressLeaderNotAnswering: the leader's index is unknown when it
// gave no status: the highest reported stands for it.
func TestProgressLeaderNotAnswering(t *testing.T) {
	c := Cluster{Now: time.Unix(1, 0), LeaderID: 1, Members: []Member{
		{ID: 1, Name: "node1", Err: "not listening"},
		{ID: 2, Name: "node2", Healthy: true, Leader: 1, RaftIndex: 5000},
		{ID: 3, Name: "node3", Healthy: true, Leader: 1, RaftIndex: 3000},
	}}
	Progress{}.Stamp(&c, 1000)
	if m := c.Members[2]; m.Behind != 2000 || m.CaughtUp {
		t.Errorf("node3: behind %d caught up %v, want 2000 false", m.Behind, m.CaughtUp)
	}
	if !c.Members[1].CaughtUp {
		t.Errorf("node2, the highest, not caught up")
	}
}
