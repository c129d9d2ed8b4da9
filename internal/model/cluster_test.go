package model

import (
	"testing"
	"time"
)

func TestHealthy(t *testing.T) {
	tests := []struct {
		name       string
		answeredAs uint64
		leader     uint64
		alarms     []Alarm
		want       bool
	}{
		{"answers as itself with a leader", 7, 1, nil, true},
		{"no leader", 7, 0, nil, false},
		{"another member answers on its URL", 9, 1, nil, false},
		{"did not answer", 0, 0, nil, false},
		{"a CORRUPT alarm names it", 7, 1, []Alarm{{MemberID: 7, Type: AlarmCorrupt}}, false},
		// etcd reports every active alarm in every member's status: another
		// member's alarm says nothing about this one.
		{"a CORRUPT alarm names another member", 7, 1, []Alarm{{MemberID: 8, Type: AlarmCorrupt}}, true},
		// NOSPACE stops writes cluster-wide, but the member still votes and
		// serves reads: it counts toward quorum like any other.
		{"a NOSPACE alarm names it", 7, 1, []Alarm{{MemberID: 7, Type: AlarmNoSpace}}, true},
	}
	for _, tt := range tests {
		if got := Healthy(7, tt.answeredAs, tt.leader, tt.alarms); got != tt.want {
			t.Errorf("%s: Healthy = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLeaderOf(t *testing.T) {
	ms := []Member{{Leader: 2}, {Leader: 2}, {Leader: 3}, {Leader: 0}}
	if got := LeaderOf(ms); got != 2 {
		t.Errorf("LeaderOf = %d, want 2 (the majority's)", got)
	}
	if got := LeaderOf([]Member{{}, {}}); got != 0 {
		t.Errorf("LeaderOf without any leader = %d, want 0", got)
	}
}

func TestPendingStamp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := Pending{}
	c := Cluster{Now: t0, Members: []Member{{ID: 1, Name: "a"}, {ID: 2, Name: "b", IsLearner: true}, {ID: 3}}}
	p.Stamp(&c, nil)
	if !c.Members[0].PendingSince.IsZero() || !c.Members[1].PendingSince.Equal(t0) || !c.Members[2].PendingSince.Equal(t0) {
		t.Fatalf("first stamp: %+v", c.Members)
	}
	// Later, the learner is still pending without progress (since t0), the
	// unstarted one is gone and forgotten.
	c2 := Cluster{Now: t0.Add(time.Minute), Members: []Member{{ID: 1, Name: "a"}, {ID: 2, Name: "b", IsLearner: true}}}
	p.Stamp(&c2, nil)
	if !c2.Members[1].PendingSince.Equal(t0) {
		t.Errorf("learner pending since %v, want %v", c2.Members[1].PendingSince, t0)
	}
	if _, ok := p[3]; ok || len(p) != 1 {
		t.Errorf("pending = %v, want only member 2", p)
	}
}

// TestPendingProgress: a learner whose applied index rises, or whose agent
// reports data arriving, is pending only since its last progress.
func TestPendingProgress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := Pending{}
	learner := func(at time.Duration, applied uint64) Cluster {
		return Cluster{Now: t0.Add(at), Members: []Member{{ID: 2, Name: "b", IsLearner: true, RaftIndex: applied}}}
	}
	steps := []struct {
		at       time.Duration
		applied  uint64
		progress string
		since    time.Duration
	}{
		{0, 0, "", 0},
		{time.Minute, 0, "snap 10MB", time.Minute},           // data arriving
		{2 * time.Minute, 0, "snap 20MB", 2 * time.Minute},   // more of it
		{3 * time.Minute, 0, "snap 20MB", 2 * time.Minute},   // stalled
		{4 * time.Minute, 500, "snap 20MB", 4 * time.Minute}, // applying
		{5 * time.Minute, 500, "snap 20MB", 4 * time.Minute}, // stalled again
	}
	for _, s := range steps {
		c := learner(s.at, s.applied)
		p.Stamp(&c, map[uint64]string{2: s.progress})
		if got := c.Members[0].PendingSince.Sub(t0); got != s.since {
			t.Errorf("at %s: pending since +%s, want +%s", s.at, got, s.since)
		}
	}
}
