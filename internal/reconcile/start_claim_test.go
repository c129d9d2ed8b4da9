package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestStartNeverRemovesAHealthyClaimant: a second host started with an
// existing member's name (a cloned machine, new hardware while the old
// one still runs) must not remove the live member; an entry that does not
// answer is removed at once only when this host's data or marker proves it
// is its own, and otherwise only after StaleGrace without an answer.
func TestStartNeverRemovesAHealthyClaimant(t *testing.T) {
	now := time.Unix(10_000, 0)
	node2 := func(healthy bool, downFor time.Duration) *model.Cluster {
		c := &model.Cluster{ClusterID: 0xc1, LeaderID: 1, Now: now, Members: []model.Member{
			mv(1, "node1", "http://127.0.0.1:2380", true), mv(2, "node2", "http://127.0.0.2:2380", healthy), mv(3, "node3", "http://127.0.0.3:2380", true)}}
		c.Members[1].ClientURLs = []string{"http://127.0.0.2:2379"}
		if downFor > 0 {
			c.Members[1].DownSince = now.Add(-downFor)
		}
		return c
	}
	empty := model.Data{Kind: model.DataEmpty}
	tests := []struct {
		name   string
		in     StartInput
		want   StartAction
		stale  uint64
		reason string
	}{
		{name: "empty disk, the name's member is healthy: another host claims it",
			in:   StartInput{Data: empty, Cluster: node2(true, 0)},
			want: ActWait, reason: "node2 already runs as member 2 at http://127.0.0.2:2379; another host claims this name"},
		{name: "this host's marker names it, but it answers: still not removed",
			in:   StartInput{Data: empty, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}, Cluster: node2(true, 0)},
			want: ActWait, reason: "another host claims this name"},
		{name: "empty disk, down for a moment: wait out the grace",
			in:   StartInput{Data: empty, Cluster: node2(false, 5*time.Second)},
			want: ActWait, reason: "not answering for 5s"},
		{name: "empty disk, down past the grace: replaced",
			in:   StartInput{Data: empty, Cluster: node2(false, StaleGrace+time.Second)},
			want: ActRejoin, stale: 2, reason: "joining it"},
		{name: "lost disk, the marker proves it is ours: at once",
			in:   StartInput{Data: empty, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}, Cluster: node2(false, time.Second)},
			want: ActRejoin, stale: 2, reason: "joining it"},
		{name: "corrupt data of that member: at once",
			in:   StartInput{Data: model.Data{Kind: model.DataCorrupt, ClusterID: 0xc1, MemberID: 2, Reason: "walpb: crc mismatch"}, Cluster: node2(false, time.Second)},
			want: ActRejoin, stale: 2, reason: "crc mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Self, in.InSpec, in.SpecSize = self, true, 3
			d := DecideStart(in)
			if d.Action != tt.want || d.StaleID != tt.stale || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("DecideStart = %s stale=%x %q, want %s stale=%x containing %q", d.Action, d.StaleID, d.Reason, tt.want, tt.stale, tt.reason)
			}
		})
	}
}

// TestStartAddRateLimited: once repair.maxPerHour adds were made in the
// last hour, this host is not added again — also when its journal is open
// (a learner removed as stale, re-added, removed again...) and when there
// is no data to move. Taking over an unstarted entry adds nothing.
func TestStartAddRateLimited(t *testing.T) {
	c := live()
	in := StartInput{Self: self, InSpec: true, SpecSize: 3, Data: model.Data{Kind: model.DataEmpty}, Cluster: c,
		AddBlocked: "rate limit: 3 adds in the last hour (repair.maxPerHour)"}
	if d := DecideStart(in); d.Action != ActWait || !strings.Contains(d.Reason, "not adding this host again: rate limit") {
		t.Errorf("DecideStart = %s %q, want a wait for the rate limit", d.Action, d.Reason)
	}
	c2 := live(model.Member{ID: 9, PeerURLs: self.PeerURLs, IsLearner: true})
	in.Cluster = c2
	if d := DecideStart(in); d.Action != ActRejoin || d.ReuseID != 9 {
		t.Errorf("DecideStart = %s reuse=%x %q, want a rejoin taking over entry 9", d.Action, d.ReuseID, d.Reason)
	}
}

// TestStartUnmountedDataDir: an empty data dir that sits on its parent's
// filesystem while the member ran on another (the disk is not mounted)
// waits; nothing is removed. A genuinely replaced disk heals as usual.
func TestStartUnmountedDataDir(t *testing.T) {
	in := StartInput{Self: self, InSpec: true, SpecSize: 3, Data: model.Data{Kind: model.DataEmpty},
		Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}, Cluster: live(mv(2, "node2", "http://127.0.0.2:2380", false)),
		DataUnmounted: "the data dir is on the filesystem of its parent (device 801), the member ran on device 802"}
	if d := DecideStart(in); d.Action != ActWait || d.StaleID != 0 || !strings.Contains(d.Reason, "data dir not mounted?") {
		t.Errorf("DecideStart = %s stale=%x %q, want a wait: data dir not mounted?", d.Action, d.StaleID, d.Reason)
	}
	in.DataUnmounted = ""
	if d := DecideStart(in); d.Action != ActRejoin || d.StaleID != 2 {
		t.Errorf("a replaced disk: DecideStart = %s stale=%x %q, want a rejoin replacing member 2", d.Action, d.StaleID, d.Reason)
	}
}

func TestUnmounted(t *testing.T) {
	tests := []struct {
		recorded, current, parent uint64
		want                      bool
	}{
		{0, 5, 5, false}, // never recorded
		{7, 7, 5, false}, // the same filesystem as when the member ran
		{7, 5, 5, true},  // on the parent's filesystem: the mount is gone
		{7, 9, 5, false}, // another filesystem mounted there: a new disk
		{5, 5, 5, false}, // never a mount point (a plain dir removed and made again)
	}
	for _, tt := range tests {
		if got := Unmounted(tt.recorded, tt.current, tt.parent); got != tt.want {
			t.Errorf("Unmounted(%d, %d, %d) = %v, want %v", tt.recorded, tt.current, tt.parent, got, tt.want)
		}
	}
}

// TestNotInSpecMoveHonoursRepairGuards: moving the data of a host the spec
// no longer lists is a data move like a repair's: repair.enabled: false
// and the rate limit hold it back too.
func TestNotInSpecMoveHonoursRepairGuards(t *testing.T) {
	for _, data := range []model.Data{
		{Kind: model.DataCorrupt, ClusterID: 0xc1, MemberID: 2, Reason: "walpb: crc mismatch"},
		{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2},
	} {
		in := StartInput{Self: self, InSpec: false, SpecSize: 3, Data: data, Cluster: live(), RepairBlocked: "repair is disabled in the spec"}
		if d := DecideStart(in); d.MoveData || d.Action != ActWait || !strings.Contains(d.Reason, "repair is disabled") {
			t.Errorf("%s data: DecideStart = %s move=%v %q, want a wait that moves nothing", data.Kind, d.Action, d.MoveData, d.Reason)
		}
	}
}
