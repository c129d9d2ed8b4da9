package model

import "testing"

func TestServesWithout(t *testing.T) {
	voter := func(id uint64, healthy bool) Member {
		return Member{ID: id, Name: "m", Healthy: healthy}
	}
	tests := []struct {
		name    string
		members []Member
		without uint64
		want    bool
		detail  string
	}{
		{"3 healthy, one leaves", []Member{voter(1, true), voter(2, true), voter(3, true)}, 3, true, "2 of 2 voters healthy (quorum 2)"},
		{"3 with one down, the down one leaves", []Member{voter(1, true), voter(2, true), voter(3, false)}, 3, true, "2 of 2 voters healthy (quorum 2)"},
		{"3 with one down, a healthy one leaves", []Member{voter(1, true), voter(2, true), voter(3, false)}, 1, false, "1 of 2 voters healthy (quorum 2)"},
		{"learners do not vote", []Member{voter(1, true), {ID: 2, Name: "l", IsLearner: true, Healthy: true}, voter(3, false)}, 0, false, "1 of 2 voters healthy (quorum 2)"},
		{"an unstarted voter is never healthy", []Member{voter(1, true), {ID: 2, Healthy: true}, voter(3, false)}, 3, false, "1 of 2 voters healthy (quorum 2)"},
		{"5 with two down", []Member{voter(1, true), voter(2, true), voter(3, true), voter(4, false), voter(5, false)}, 0, true, "3 of 5 voters healthy (quorum 3)"},
		{"no voters left", []Member{voter(1, true)}, 1, false, "0 of 0 voters healthy (quorum 1)"},
	}
	for _, tt := range tests {
		ok, detail := NewView(Cluster{Members: tt.members}, nil).ServesWithout(tt.without)
		if ok != tt.want || detail != tt.detail {
			t.Errorf("%s: ServesWithout = %v %q, want %v %q", tt.name, ok, detail, tt.want, tt.detail)
		}
	}
}

// TestReadyToRemoveServing: removing a voter that serves leaves a quorum
// of the voters left, caught up (F4).
func TestReadyToRemoveServing(t *testing.T) {
	voter := func(id uint64, name string, healthy, up bool, lag string) Member {
		return Member{ID: id, Name: name, Healthy: healthy, CaughtUp: up, Lag: lag}
	}
	lagging := voter(3, "node3", true, false, "node3 is catching up (index 1200 behind the leader)")
	tests := []struct {
		name    string
		members []Member
		without uint64
		want    bool
		detail  string
	}{
		{"3 caught up, one leaves", []Member{voter(1, "node1", true, true, ""), voter(2, "node2", true, true, ""), voter(3, "node3", true, true, "")}, 1, true,
			"2 of 2 voters left caught up (quorum 2)"},
		// The case F4 is about: node3 answers with a leader (QuorumWithout
		// counts it) but lags, so stopping node1 leaves writes to wait.
		{"a healthy voter lags", []Member{voter(1, "node1", true, true, ""), voter(2, "node2", true, true, ""), lagging}, 1, false,
			"removing it would leave 1 of 2 voters caught up, below quorum 2 (node3 is catching up (index 1200 behind the leader))"},
		{"the laggard itself leaves", []Member{voter(1, "node1", true, true, ""), voter(2, "node2", true, true, ""), lagging}, 3, true,
			"2 of 2 voters left caught up (quorum 2)"},
		{"5 with one lagging still have a quorum", []Member{voter(1, "a", true, true, ""), voter(2, "b", true, true, ""), voter(3, "c", true, true, ""), lagging, voter(5, "e", true, true, "")}, 1, true,
			"3 of 4 voters left caught up (quorum 3)"},
		{"a down voter is never caught up", []Member{voter(1, "node1", true, true, ""), voter(2, "node2", false, true, ""), voter(3, "node3", true, true, "")}, 1, false,
			"removing it would leave 1 of 2 voters caught up, below quorum 2 (unhealthy: node2)"},
		{"learners do not vote", []Member{voter(1, "node1", true, true, ""), {ID: 2, Name: "l", IsLearner: true, Healthy: true, CaughtUp: true}, voter(3, "node3", true, true, "")}, 1, true,
			"1 of 1 voter left caught up (quorum 1)"},
	}
	for _, tt := range tests {
		v := NewView(Cluster{Members: tt.members}, nil)
		ok, detail := v.ReadyToRemove(tt.without)
		if ok != tt.want || detail != tt.detail {
			t.Errorf("%s: ReadyToRemove = %v %q, want %v %q", tt.name, ok, detail, tt.want, tt.detail)
		}
		if plain, _ := v.ServesWithout(tt.without); tt.name == "a healthy voter lags" && !plain {
			t.Errorf("%s: the plain rule refuses too: the row proves nothing", tt.name)
		}
	}
}

// TestReadyToStop: a voter that stays in the membership while it
// stops counting leaves raft's quorum of every voter to the others.
func TestReadyToStop(t *testing.T) {
	up := func(id uint64) Member { return Member{ID: id, Name: "m", Healthy: true, CaughtUp: true} }
	lag := Member{ID: 3, Name: "node3", Healthy: true, Lag: "node3 is catching up"}
	tests := []struct {
		name    string
		members []Member
		want    bool
		detail  string
	}{
		{"3 caught up", []Member{up(1), up(2), up(3)}, true, "2 of 2 voters caught up (quorum 2)"},
		{"2: the other alone is no quorum of 2", []Member{up(1), up(2)}, false, "1 of 1 voters caught up (quorum 2)"},
		{"4 caught up", []Member{up(1), up(2), up(3), up(4)}, true, "3 of 3 voters caught up (quorum 3)"},
		{"4, one lagging: 2 of 4 is no quorum", []Member{up(1), up(2), lag, up(4)}, false, "2 of 3 voters caught up (quorum 3); node3 is catching up"},
		{"5, one lagging: 3 of 5 is", []Member{up(1), up(2), lag, up(4), up(5)}, true, "3 of 4 voters caught up (quorum 3); node3 is catching up"},
		{"a learner does not count", []Member{up(1), up(2), {ID: 5, Name: "l", IsLearner: true, Healthy: true, CaughtUp: true}}, false, "1 of 1 voters caught up (quorum 2)"},
	}
	for _, tt := range tests {
		v := NewView(Cluster{Members: tt.members}, nil)
		ok, detail := v.ReadyToStop(1)
		if ok != tt.want || detail != tt.detail {
			t.Errorf("%s: ReadyToStop = %v %q, want %v %q", tt.name, ok, detail, tt.want, tt.detail)
		}
		if plain, _ := v.ReadyToRemove(1); tt.name == "4, one lagging: 2 of 4 is no quorum" && !plain {
			t.Errorf("%s: ReadyToRemove refuses too: the row proves nothing", tt.name)
		}
	}
}
