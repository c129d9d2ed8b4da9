package testbed

import (
	"errors"
	"go/parser"
	"go/token"
	"maps"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// healthy is a started voter that answered as itself and knows leader 1.
func healthy(id uint64, name string) MemberState {
	return MemberState{ID: id, Name: name, ClientURLs: []string{"http://127.0.0.1:2379"}, AsItself: true, Leader: 1}
}

func TestUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*MemberState)
		why   string // "" for healthy; else a part of the reason
		voter bool
	}{
		{"answered as itself, knows a leader, no alarm", func(*MemberState) {}, "", true},
		{"a healthy learner is healthy, not a voter", func(m *MemberState) { m.Learner = true }, "", false},
		{"no answer", func(m *MemberState) { m.AsItself, m.NoAnswer = false, "connection refused" }, "connection refused", false},
		{"answered as another member", func(m *MemberState) { m.AsItself, m.NoAnswer = false, "answers as member 9" }, "answers as member 9", false},
		{"knows no leader", func(m *MemberState) { m.Leader = 0 }, "knows no leader", false},
		{"an alarm names it", func(m *MemberState) { m.Alarms = []pb.AlarmType{pb.AlarmType_NOSPACE} }, "NOSPACE", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := healthy(1, "a")
			tc.edit(&m)
			why := m.Unhealthy()
			if (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("Unhealthy() = %q, want %q", why, tc.why)
			}
			if m.Healthy() != (tc.why == "") {
				t.Errorf("Healthy() = %v, Unhealthy() = %q", m.Healthy(), why)
			}
			if m.HealthyVoter() != tc.voter {
				t.Errorf("HealthyVoter() = %v, want %v", m.HealthyVoter(), tc.voter)
			}
		})
	}
}

// TestAlarmsOf: an alarm counts against the member it names only.
func TestAlarmsOf(t *testing.T) {
	alarms := []*pb.AlarmMember{
		{MemberID: 1, Alarm: pb.AlarmType_NOSPACE},
		{MemberID: 2, Alarm: pb.AlarmType_CORRUPT},
		{MemberID: 1, Alarm: pb.AlarmType_CORRUPT},
		{MemberID: 3, Alarm: pb.AlarmType_NONE},
	}
	for _, tc := range []struct {
		id   uint64
		want []pb.AlarmType
	}{
		{1, []pb.AlarmType{pb.AlarmType_NOSPACE, pb.AlarmType_CORRUPT}},
		{2, []pb.AlarmType{pb.AlarmType_CORRUPT}},
		{3, nil},
		{4, nil},
	} {
		got := alarmsOf(alarms, tc.id)
		if len(got) != len(tc.want) {
			t.Errorf("alarmsOf(%d) = %v, want %v", tc.id, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("alarmsOf(%d) = %v, want %v", tc.id, got, tc.want)
			}
		}
	}
}

func TestExactVoters(t *testing.T) {
	a, b, c := healthy(0xa, "a"), healthy(0xb, "b"), healthy(0xc, "c")
	with := func(m MemberState, edit func(*MemberState)) MemberState { edit(&m); return m }
	three := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		obs     Observation
		names   []string
		wantIDs map[string]uint64
		why     string // a part of the one-line reason when it does not hold
	}{
		{"exactly the three, healthy", Observation{Members: []MemberState{a, b, c}}, three,
			map[string]uint64{"a": 0xa, "b": 0xb, "c": 0xc}, ""},
		{"order does not matter", Observation{Members: []MemberState{c, a, b}}, three,
			map[string]uint64{"a": 0xa, "b": 0xb, "c": 0xc}, ""},
		{"no answer from the cluster", Observation{Err: errors.New("member list: context deadline exceeded")}, three,
			nil, "deadline exceeded"},
		{"one missing", Observation{Members: []MemberState{a, c}}, three, nil, "missing b"},
		{"an extra member", Observation{Members: []MemberState{a, b, c, healthy(0xd, "d")}}, three, nil, "extra member d (d)"},
		{"a member added, never started", Observation{Members: []MemberState{a, b, c, {ID: 0xe}}}, three, nil, "member e never started"},
		{"a learner", Observation{Members: []MemberState{a, with(b, func(m *MemberState) { m.Learner = true }), c}}, three,
			nil, "b (b) is a learner"},
		{"an unhealthy voter says why", Observation{Members: []MemberState{a, b, with(c, func(m *MemberState) { m.Leader = 0 })}}, three,
			nil, "c (c) unhealthy: knows no leader"},
		{"a stale entry answering as the new member", Observation{Members: []MemberState{a, b,
			with(healthy(0xf, "c"), func(m *MemberState) { m.AsItself, m.NoAnswer = false, "answers as member c" }), c}}, three,
			nil, "c (f) unhealthy: no answer as itself: answers as member c"},
		{"an alarm on one member", Observation{Members: []MemberState{a, with(b, func(m *MemberState) { m.Alarms = []pb.AlarmType{pb.AlarmType_CORRUPT} }), c}}, three,
			nil, "b (b) unhealthy: alarms [CORRUPT]"},
		{"two healthy members of one name", Observation{Members: []MemberState{a, b, healthy(0x1b, "b")}}, []string{"a", "b"},
			nil, "two members named b (b, 1b)"},
		{"one member", Observation{Members: []MemberState{a}}, []string{"a"}, map[string]uint64{"a": 0xa}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, why := tc.obs.ExactVoters(tc.names...)
			if tc.why == "" && why != "" {
				t.Fatalf("ExactVoters(%v) = %q, want it to hold", tc.names, why)
			}
			if tc.why != "" && !strings.Contains(why, tc.why) {
				t.Fatalf("ExactVoters(%v) = %q, want a reason with %q", tc.names, why, tc.why)
			}
			if strings.Contains(why, "\n") {
				t.Errorf("reason %q is more than one line", why)
			}
			if !maps.Equal(ids, tc.wantIDs) {
				t.Errorf("ExactVoters(%v) IDs = %v, want %v", tc.names, ids, tc.wantIDs)
			}
		})
	}
}

func TestLeader(t *testing.T) {
	led := func(m MemberState, leader uint64) MemberState { m.Leader = leader; return m }
	down := healthy(0xc, "c")
	down.AsItself, down.Leader = false, 0
	for _, tc := range []struct {
		name    string
		members []MemberState
		want    uint64
	}{
		{"all agree", []MemberState{led(healthy(1, "a"), 2), led(healthy(2, "b"), 2)}, 2},
		{"an unhealthy member's view does not count", []MemberState{led(healthy(1, "a"), 2), down, led(healthy(2, "b"), 2)}, 2},
		{"an election under way", []MemberState{led(healthy(1, "a"), 2), led(healthy(2, "b"), 1)}, 0},
		{"nobody healthy", []MemberState{down}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Observation{Members: tc.members}).Leader(); got != tc.want {
				t.Errorf("Leader() = %x, want %x", got, tc.want)
			}
		})
	}
}

// TestObserverIsIndependent holds probe.go to its doc comment: the oracle
// imports nothing from the system under test.
func TestObserverIsIndependent(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "probe.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Imports) == 0 {
		t.Fatal("probe.go imports nothing: is this the observer?")
	}
	for _, imp := range f.Imports {
		if path := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(path, "github.com/etcdkeeper/etcdkeeper/") {
			t.Errorf("probe.go imports %s: the observer must share no code with the system under test", path)
		}
	}
}
