package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestStartNeverActsOnAnotherCluster: when the cluster that answers is not
// the one this host's data dir or marker belongs to, or the answering
// endpoints disagree on the cluster ID, the agent waits: nothing is
// removed, nothing is moved.
func TestStartNeverActsOnAnotherCluster(t *testing.T) {
	foreign := live()
	foreign.Foreign = []string{"http://127.0.0.3:2379 answers for cluster beef, not c1"}
	tests := []struct {
		name   string
		in     StartInput
		reason string
	}{
		{name: "healthy data of another cluster",
			in:     StartInput{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xdead, MemberID: 2}, Cluster: live()},
			reason: "the peers answer for cluster c1, but the data dir belongs to cluster dead"},
		{name: "corrupt data of another cluster",
			in:     StartInput{Data: model.Data{Kind: model.DataCorrupt, ClusterID: 0xdead, MemberID: 2, Reason: "crc"}, Cluster: live()},
			reason: "the data dir belongs to cluster dead"},
		{name: "empty data, the marker names another cluster",
			in:     StartInput{Data: model.Data{Kind: model.DataEmpty}, Marker: &model.Marker{ClusterID: 0xdead, MemberID: 2}, Cluster: live()},
			reason: "this host's marker belongs to cluster dead"},
		{name: "the endpoints disagree",
			in:     StartInput{Data: model.Data{Kind: model.DataEmpty}, Cluster: foreign},
			reason: "answers for cluster beef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Self, in.InSpec, in.SpecSize = self, true, 3
			d := DecideStart(in)
			if d.Action != ActWait || d.MoveData || d.StaleID != 0 || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("DecideStart = %s move=%v stale=%x %q; want wait containing %q", d.Action, d.MoveData, d.StaleID, d.Reason, tt.reason)
			}
		})
	}
}
