package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// lagging marks a member that answers with a leader but is not caught up
// (model.CaughtUp): it came back 1200 entries behind.
func lagging(m *model.Member) {
	m.CaughtUp, m.Behind, m.Rising = false, 1200, true
	m.Lag = m.Name + " is catching up (index 1200 behind the leader)"
}

// frozen marks a member stuck on its disk: it answers with its last
// leader and an index that does not move.
func frozen(m *model.Member) {
	m.CaughtUp, m.Behind = false, 12
	m.Lag = m.Name + " is not catching up (index 12 behind the leader, unchanged since 11:59:00: a stuck disk?)"
}

// clusterWith is healthyCluster of names with mods applied by member ID.
func clusterWith(names []string, mods map[uint64]memberMod) *model.Cluster {
	c := healthyCluster(names...)
	for i := range c.Members {
		if mod, ok := mods[c.Members[i].ID]; ok {
			mod(&c.Members[i])
		}
	}
	return c
}

// TestDecideWaitsForCatchUp: every voluntary stop of a serving member
// counts the others only when they are caught up, not merely answering.
// On 8011516 the lagging rows restart or stop at once (F4 of the
// 2026-12-01 review).
func TestDecideWaitsForCatchUp(t *testing.T) {
	three := []string{"node1", "node2", "node3"}
	five := []string{"node1", "node2", "node3", "node4", "node5"}
	voter := &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}
	corrupt := &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: model.AlarmCorrupt}}}
	corruptWith := func(mod memberMod) *model.Cluster {
		c := corruptOn(2, nil)
		mod(&c.Members[2])
		return c
	}
	tests := []struct {
		name   string
		in     Input
		want   ActionKind
		reason string
	}{
		{name: "settings changed, lock held, node3 back but 1200 behind",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Cluster: clusterWith(three, map[uint64]memberMod{3: lagging})},
			want: DoWait, reason: "not restarting while the others have 1 of 2 voters caught up (quorum 2); node3 is catching up (index 1200 behind the leader)"},
		{name: "settings changed, lock not held, node3 behind: no lock taken",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}}, Cluster: clusterWith(three, map[uint64]memberMod{3: lagging})},
			want: DoWait, reason: "node3 is catching up"},
		{name: "settings changed, node3 stuck on its disk",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Cluster: clusterWith(three, map[uint64]memberMod{3: frozen})},
			want: DoWait, reason: "node3 is not catching up"},
		{name: "settings changed, 5 members, one behind: the other three suffice",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Memory: model.Memory{RolloutSnapshot: "g2: changed settings"}, Cluster: clusterWith(five, map[uint64]memberMod{3: lagging}), Generation: "g2"},
			want: DoRestart, reason: "spec g2"},
		{name: "settings changed, 5 members, two behind",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Cluster: clusterWith(five, map[uint64]memberMod{3: lagging, 4: frozen})},
			want: DoWait, reason: "2 of 4 voters caught up (quorum 3)"},
		{name: "CORRUPT alarm on this member, node3 behind",
			in:   Input{Local: model.Local{Running: true, Answer: corrupt}, Cluster: corruptWith(lagging)},
			want: DoWait, reason: "not stopping it while the others have 1 of 2 voters caught up (quorum 2); node3 is catching up"},
		{name: "CORRUPT alarm on this member, node3 level (writes are refused: an idle cluster)",
			in:   Input{Local: model.Local{Running: true, Answer: corrupt}, Cluster: corruptOn(2, nil)},
			want: DoStopForRepair, reason: "CORRUPT alarm on member 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Self, tt.in.InSpec, tt.in.Desired = specMembers("node2")[0], true, specMembers(three...)
			got := Decide(tt.in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("Decide = %s %q, want %s containing %q", got.Kind, got.Reason, tt.want, tt.reason)
			}
			if got.Kind == DoWait && !got.ReleaseLock {
				t.Errorf("a wait for a laggard keeps the lock: another agent's step may be what it waits for")
			}
		})
	}
}

// TestPlanRemovalWaitsForCatchUp: removing a serving extra takes its vote
// away, so the voters left must be a quorum of caught-up ones; removing a
// dead one takes no vote and waits for nobody.
func TestPlanRemovalWaitsForCatchUp(t *testing.T) {
	opt := Options{LearnerTimeout: planTimeout}
	tests := []struct {
		name    string
		desired []string
		obs     model.Cluster
		kind    StepKind
		id      uint64
		reason  string
	}{
		// The review's sequence 2: node3 and node4 have just healed.
		{name: "healthy extra, two voters behind", desired: []string{"node1", "node2", "node3", "node4"},
			obs:  observed(1, mem(1, "node1"), mem(2, "node2"), mem(3, "node3", lagging), mem(4, "node4", lagging), mem(9, "old9")),
			kind: StepWait, reason: "removing it would leave 2 of 4 voters caught up, below quorum 3 (node3 is catching up (index 1200 behind the leader); node4 is catching up"},
		{name: "healthy extra, one voter behind: the rest suffice", desired: []string{"node1", "node2", "node3", "node4"},
			obs:  observed(1, mem(1, "node1"), mem(2, "node2"), mem(3, "node3"), mem(4, "node4", lagging), mem(9, "old9")),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec"},
		{name: "healthy extra leader, the spec voters behind: no move either", desired: []string{"node1", "node2"},
			obs:  observed(9, mem(1, "node1"), mem(2, "node2", frozen), mem(9, "old9")),
			kind: StepWait, reason: "removing it would leave 1 of 2 voters caught up, below quorum 2 (node2 is not catching up"},
		{name: "dead extra while a voter lags: removed, it takes no vote", desired: []string{"node1", "node2"},
			obs:  observed(1, mem(1, "node1"), mem(2, "node2", lagging), mem(9, "old9", down)),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(specOf(tt.desired...), tt.obs, opt)
			if got.Kind != tt.kind || got.MemberID != tt.id || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("Plan = %s %x %q, want %s %x containing %q", got.Kind, got.MemberID, got.Reason, tt.kind, tt.id, tt.reason)
			}
		})
	}
}
