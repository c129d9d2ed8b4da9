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
