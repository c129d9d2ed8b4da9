package agent

import (
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestSnapshotClusterID: the recovery report offers snapshots of the
// cluster the data names, else (data corrupt or lost) of the one the
// marker names, else of none.
func TestSnapshotClusterID(t *testing.T) {
	a := newTestAgent(t, "", nil)
	_, self := a.Spec()
	self.StateDir = t.TempDir()
	a.self = self
	if got := a.snapshotClusterID(""); got != "" {
		t.Errorf("no data, no marker: %q, want none", got)
	}
	if err := a.saveMarker(model.Marker{ClusterID: 0xc1d, MemberID: 1}); err != nil {
		t.Fatal(err)
	}
	if got := a.snapshotClusterID(""); got != "c1d" {
		t.Errorf("no data, a marker: %q, want the marker's c1d", got)
	}
	if got := a.snapshotClusterID("7417"); got != "7417" {
		t.Errorf("the data says 7417: %q", got)
	}
}
