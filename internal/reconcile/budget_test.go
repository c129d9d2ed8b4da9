package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestMaxDisrupted: maintenance.maxDisrupted lets a second member out of
// service in a cluster of 5 (one is down, another restarts), never in a
// smaller one, and never below raft's quorum of caught-up voters.
func TestMaxDisrupted(t *testing.T) {
	due := model.Restart{Why: "changed settings"}
	tests := []struct {
		name     string
		size     int
		down     []int
		max      int
		want     ActionKind
		contains string
	}{
		{"5 members, one down, budget 1: held", 5, []int{5}, 1, DoWait, "rollout held: node5 is not a healthy voter"},
		{"5 members, one down, budget 2: restarts", 5, []int{5}, 2, DoRestart, "restarting etcd of member 2"},
		{"5 members, two down, budget 2: held", 5, []int{4, 5}, 2, DoWait, "rollout held"},
		{"3 members, one down, budget 2: 1 all the same", 3, []int{3}, 2, DoWait, "rollout held"},
		{"7 members, two down, budget 3: the quorum of 4 caught up others is kept", 7, []int{6, 7}, 3, DoRestart, "restarting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for i := 1; i <= tt.size; i++ {
				names = append(names, "node"+string(rune('0'+i)))
			}
			c := healthyCluster(names...)
			for _, d := range tt.down {
				c.Members[d-1].Healthy, c.Members[d-1].CaughtUp, c.Members[d-1].Err = false, false, "connection refused"
			}
			in := Input{Self: specMembers(names...)[1], InSpec: true, Desired: specMembers(names...), Generation: "g1", Cluster: c, MaxDisrupted: tt.max,
				Local:  model.Local{Running: true, LockHeld: true, Restart: due, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}},
				Memory: model.Memory{RolloutSnapshot: RolloutKey("g1", due)}}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.contains) {
				t.Errorf("got %s (%s), want %s containing %q", got.Kind, got.Reason, tt.want, tt.contains)
			}
		})
	}
}
