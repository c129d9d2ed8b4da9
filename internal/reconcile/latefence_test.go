package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestLateFence: a host that was away while its cluster was recovered
// from a snapshot (a new cluster ID) takes its part as a fenced host when
// the recovered cluster's record names its old cluster; without a record,
// or with one about another cluster, it waits as before (another
// cluster's data is never moved on a guess).
func TestLateFence(t *testing.T) {
	recovered := func(old uint64) *model.Cluster {
		c := healthyCluster("node1")
		c.ClusterID = 0xc2
		c.Recovered = &model.Recovered{ID: "r1", Source: "node1", OldClusterID: old, ClusterID: 0xc2}
		return c
	}
	oldData := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 3}
	tests := []struct {
		name   string
		in     Input
		want   ActionKind
		reason string
	}{
		{name: "the record names my data's cluster: fence",
			in:   Input{Local: model.Local{Data: oldData}, Cluster: recovered(0xc1)},
			want: DoAcceptFence, reason: "recovered from node1 (recovery r1) while this host was away"},
		{name: "the record names my marker's cluster (data gone): fence",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 3}}, Cluster: recovered(0xc1)},
			want: DoAcceptFence, reason: "fencing my old member"},
		{name: "a record about another cluster: wait",
			in:   Input{Local: model.Local{Data: oldData}, Cluster: recovered(0xc9)},
			want: DoWait, reason: "belongs to cluster c1"},
		{name: "no record: wait",
			in:   Input{Local: model.Local{Data: oldData}, Cluster: func() *model.Cluster { c := recovered(0xc1); c.Recovered = nil; return c }()},
			want: DoWait, reason: "belongs to cluster c1"},
		{name: "already fenced by that recovery: the fence decides",
			in: Input{Local: model.Local{Data: oldData, Recovery: model.Recovery{ID: "r1", Role: model.RecoveryFenced, Step: "fenced", Source: "node1", OldMemberID: 3, OldClusterID: 0xc1}},
				Cluster: recovered(0xc1)},
			want: DoTakeLock, reason: "not list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Self, tt.in.InSpec, tt.in.Desired = specMembers("node3")[0], true, specMembers("node1", "node2", "node3")
			got := Decide(tt.in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("Decide = %s %q, want %s with %q", got.Kind, got.Reason, tt.want, tt.reason)
			}
			if got.Kind == DoAcceptFence && (got.Recovered == nil || got.Recovered.ID != "r1") {
				t.Errorf("the fence carries recovery %v, want r1", got.Recovered)
			}
		})
	}
}

// TestSourceChecksQuorumBeforeStopping: a source whose etcd runs with a
// leader in a cluster with a healthy quorum refuses before it stops
// anything (stopped, it could not count itself among the healthy).
func TestSourceChecksQuorumBeforeStopping(t *testing.T) {
	in := Input{Self: specMembers("node2")[0], InSpec: true, Desired: specMembers("node1", "node2", "node3"),
		Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1},
			Recovery: model.Recovery{ID: "r1", Role: model.RecoverySource, Step: "requested", Source: "node2"}},
		Cluster: healthyCluster("node1", "node2", "node3")}
	if got := Decide(in); got.Kind != DoRefuseRecovery || !strings.Contains(got.Reason, "3 of 3 voters") {
		t.Errorf("Decide = %s %q, want a refusal before any stop", got.Kind, got.Reason)
	}
	in.Cluster = nil // not seen, but the member has a leader: still refused
	if got := Decide(in); got.Kind != DoRefuseRecovery || !strings.Contains(got.Reason, "has a leader (1)") {
		t.Errorf("with a leader, no cluster seen: Decide = %s %q, want a refusal", got.Kind, got.Reason)
	}
	in.Local.Answer.Leader, in.Local.LeaderlessFor = 0, FenceNoLeader // no quorum: stop, then force
	if got := Decide(in); got.Kind != DoStopForRecovery {
		t.Errorf("without a quorum: Decide = %s %q, want stop-for-recovery", got.Kind, got.Reason)
	}
}
