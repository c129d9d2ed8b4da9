package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

var self = spec.Member{Name: "node2", PeerURLs: []string{"http://127.0.0.2:2380"}, ClientURLs: []string{"http://127.0.0.2:2379"}}

func mv(id uint64, name, peer string, healthy bool) model.Member {
	return model.Member{ID: id, Name: name, PeerURLs: []string{peer}, Healthy: healthy}
}

// live is a cluster (ID 0xc1) with node1 and node3 healthy and the given
// extra entries.
func live(extra ...model.Member) *model.Cluster {
	v := &model.Cluster{ClusterID: 0xc1, LeaderID: 1, Members: []model.Member{
		mv(1, "node1", "http://127.0.0.1:2380", true),
		mv(3, "node3", "http://127.0.0.3:2380", true),
	}}
	v.Members = append(v.Members, extra...)
	return v
}

func TestDecideStart(t *testing.T) {
	healthy := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}
	corrupt := model.Data{Kind: model.DataCorrupt, ClusterID: 0xc1, MemberID: 2, Reason: "walpb: crc mismatch"}
	learner := mv(9, "", "http://127.0.0.2:2380", false)
	learner.IsLearner = true
	downSelf := mv(2, "node2", "http://127.0.0.2:2380", false)
	downNode3 := mv(3, "node3", "http://127.0.0.3:2380", false)
	twoDown := &model.Cluster{ClusterID: 0xc1, LeaderID: 1, Members: []model.Member{mv(1, "node1", "http://127.0.0.1:2380", true), downNode3, downSelf}}

	tests := []struct {
		name  string
		in    StartInput
		want  StartAction
		move  bool
		stale uint64
		reuse uint64
		// reasonPart is a part of the reason that only the intended
		// rule gives ("...$": the end of it; see reasonHas).
		reasonPart string
	}{
		{name: "healthy data, no peer answers: start as is",
			in: StartInput{Data: healthy}, want: ActStartAsIs, reasonPart: "data dir holds a member; starting it as it is"},
		{name: "healthy data listed by the live cluster: start as is",
			in: StartInput{Data: healthy, Cluster: live(downSelf)}, want: ActStartAsIs, reasonPart: "data dir holds a member of the live cluster; starting it as it is"},
		{name: "healthy data of a removed member: rejoin, moving the data aside",
			in: StartInput{Data: healthy, Cluster: live()}, want: ActRejoin, move: true, reasonPart: "data dir holds member 2 of cluster c1, which the live cluster c1 does not list"},
		{name: "healthy data of another cluster: wait, nothing moved",
			in: StartInput{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xdead, MemberID: 2}, Cluster: live()}, want: ActWait,
			reasonPart: "the peers answer for cluster c1, but the data dir belongs to cluster dead"},
		{name: "empty, never joined, nobody answers: form the cluster",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}}, want: ActStartNew, reasonPart: "no peer answers and this host never joined: forming the cluster from the spec"},
		{name: "empty, never joined, a peer answers but refuses us (TLS, auth): never new",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, PeerAnswered: "https://127.0.0.1:2379 refused us: authentication failed"}, want: ActWait, reasonPart: "never bootstrapping a new cluster next to it"},
		{name: "empty, but the marker says we were a member: never new",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}}, want: ActWait,
			reasonPart: "this host was member 2 of cluster c1: waiting for peers to rejoin, never bootstrapping a new cluster"},
		{name: "empty, live cluster without us: join",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Cluster: live()}, want: ActRejoin, reasonPart: "data dir is empty and the cluster is live: joining it$"},
		{name: "empty, live cluster lists our dead member: remove it first",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}, Cluster: live(downSelf)}, want: ActRejoin, stale: 2,
			reasonPart: "data dir is empty and the cluster is live: joining it$"},
		{name: "empty, added but never started with our peer URL: reuse it",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Cluster: live(learner)}, want: ActRejoin, reuse: 9, reasonPart: "data dir is empty and the cluster is live: joining it$"},
		{name: "empty, our dead member but the rest has no quorum without it",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Marker: &model.Marker{MemberID: 2}, Cluster: twoDown}, want: ActWait,
			reasonPart: "quorum lost: manual recovery needed: data dir is empty and the cluster is live: joining it; removing my old member 2 would leave 1 of 2 voters healthy"},
		{name: "corrupt, healthy quorum without us: repair",
			in: StartInput{Data: corrupt, Cluster: live(downSelf)}, want: ActRejoin, move: true, stale: 2, reasonPart: "data is corrupt: walpb: crc mismatch$"},
		{name: "corrupt, nobody answers: quorum lost, change nothing",
			in: StartInput{Data: corrupt}, want: ActWait, reasonPart: "quorum lost: manual recovery needed: data is corrupt (walpb: crc mismatch) and no healthy quorum of peers answers"},
		{name: "corrupt, others cannot form quorum without us",
			in: StartInput{Data: corrupt, Cluster: twoDown}, want: ActWait,
			reasonPart: "quorum lost: manual recovery needed: data is corrupt: walpb: crc mismatch; removing my old member 2 would leave 1 of 2 voters healthy"},
		{name: "corrupt in a one-member cluster: nothing to rejoin",
			in: StartInput{Data: corrupt, SpecSize: 1}, want: ActWait, reasonPart: "and this is a one-member cluster: there is nothing to rejoin"},
		{name: "corrupt but rate limited",
			in: StartInput{Data: corrupt, Cluster: live(downSelf), RepairBlocked: "rate limit"}, want: ActWait, reasonPart: "data is corrupt: walpb: crc mismatch; not repairing: rate limit"},
		{name: "structurally healthy but etcd found an inconsistency with peers",
			in: StartInput{Data: healthy, ExitCorrupt: true, ExitReason: "data inconsistency with peers", Cluster: live(downSelf)}, want: ActRejoin, move: true, stale: 2,
			reasonPart: "data is corrupt: data inconsistency with peers$"},
		{name: "locked data dir: wait, never move",
			in: StartInput{Data: model.Data{Kind: model.DataLocked, Reason: "flock"}, Cluster: live()}, want: ActWait, reasonPart: "data dir is locked by another process"},
		{name: "unreadable data dir (permissions): wait, never move or bootstrap",
			in: StartInput{Data: model.Data{Kind: model.DataUnreadable, Reason: "permission denied"}}, want: ActWait, reasonPart: "data dir cannot be read, fix it by hand"},
		{name: "not in the spec, still a member: keep serving",
			in: StartInput{Data: healthy, Cluster: live(downSelf)}, want: ActStartAsIs, reasonPart: "node2 is not in the spec but still a member: running until the cluster removes it"},
		{name: "not in the spec and removed: idle, data moved aside",
			in: StartInput{Data: healthy, Cluster: live()}, want: ActIdle, move: true, reasonPart: "node2 is not in the spec and not a member: idle until the spec lists it again"},
		{name: "not in the spec, empty: idle",
			in: StartInput{Data: model.Data{Kind: model.DataEmpty}, Cluster: live()}, want: ActIdle, reasonPart: "node2 is not in the spec and not a member: idle until the spec lists it again"},
		// Dropped from the spec with corrupt data: the same rule as a
		// corrupt member the spec lists, nothing moves without a quorum.
		{name: "not in the spec, corrupt, no cluster observed: quorum lost, nothing moves",
			in: StartInput{Data: corrupt}, want: ActWait, reasonPart: "quorum lost: manual recovery needed: node2 is not in the spec and its data is corrupt"},
		{name: "not in the spec, etcd found its data corrupt, no cluster observed: nothing moves, never started",
			in: StartInput{Data: healthy, ExitCorrupt: true, ExitReason: "data inconsistency with peers"}, want: ActWait, reasonPart: "quorum lost: manual recovery needed: node2 is not in the spec and its data is corrupt (data inconsistency with peers)"},
		{name: "not in the spec, corrupt, live cluster without it: idle, data moved aside",
			in: StartInput{Data: corrupt, Cluster: live()}, want: ActIdle, move: true, reasonPart: "node2 is not in the spec and its data is corrupt (walpb: crc mismatch): idle, data moved aside"},
		{name: "not in the spec, etcd found its data corrupt, live cluster still lists it: never started, idle",
			in: StartInput{Data: healthy, ExitCorrupt: true, ExitReason: "data inconsistency with peers", Cluster: live(downSelf)}, want: ActIdle, move: true,
			reasonPart: "node2 is not in the spec and its data is corrupt (data inconsistency with peers): idle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.reasonPart == "" {
				t.Fatal("row without reasonPart: name the part of the reason that only the intended rule gives")
			}
			in := tt.in
			in.Self = self
			in.InSpec = !strings.HasPrefix(tt.name, "not in the spec")
			if in.SpecSize == 0 {
				in.SpecSize = 3
			}
			d := DecideStart(in)
			if d.Action != tt.want {
				t.Fatalf("action = %s (%s), want %s", d.Action, d.Reason, tt.want)
			}
			if d.MoveData != tt.move || d.StaleID != tt.stale || d.ReuseID != tt.reuse {
				t.Errorf("move=%v stale=%x reuse=%x, want move=%v stale=%x reuse=%x (%s)", d.MoveData, d.StaleID, d.ReuseID, tt.move, tt.stale, tt.reuse, d.Reason)
			}
			if !reasonHas(d.Reason, tt.reasonPart) {
				t.Errorf("reason %q does not mention %q", d.Reason, tt.reasonPart)
			}
		})
	}
}
