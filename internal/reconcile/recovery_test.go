package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// recSource is node2's part as the source of recovery r1 at step.
func recSource(step string, fromSnapshot bool) model.Recovery {
	return model.Recovery{ID: "r1", Role: model.RecoverySource, Step: step, Source: "node2", OldMemberID: 2, OldClusterID: 0xc1, FromSnapshot: fromSnapshot}
}

// recFence is node2 fenced by recovery r1 from node1: its old member was
// 2 of cluster c1.
func recFence() model.Recovery {
	return model.Recovery{ID: "r1", Role: model.RecoveryFenced, Step: "fenced", Source: "node1", OldMemberID: 2, OldClusterID: 0xc1}
}

// recovered is the cluster recovered from node1: node1 alone, healthy, as
// --force-new-cluster leaves it (the old cluster's ID and node1's member
// ID), or with a new ID (restored from a snapshot: new IDs).
func recovered(clusterID, node1 uint64) *model.Cluster {
	return &model.Cluster{ClusterID: clusterID, LeaderID: node1, Members: []model.Member{
		{ID: node1, Name: "node1", PeerURLs: []string{"http://127.0.0.1:2380"}, ClientURLs: []string{"http://127.0.0.1:2379"}, Healthy: true, Leader: node1},
	}}
}

// healthyOnly is the 3-member cluster c1 with only the named members
// healthy.
func healthyOnly(names ...string) *model.Cluster {
	c := healthyCluster("node1", "node2", "node3")
	for i := range c.Members {
		c.Members[i].Healthy = false
		for _, n := range names {
			if c.Members[i].Name == n {
				c.Members[i].Healthy = true
			}
		}
	}
	return c
}

// TestDecideRecovery covers Decide for a host that takes part in a
// recovery from quorum loss (Local.Recovery open), a row per rule of
// decideSource, decideFenced and fenceStart, and the ordinary decisions
// they hand over to. Each row names the action and a part of the reason
// only the intended rule gives ("...$": the end of it).
func TestDecideRecovery(t *testing.T) {
	desired := specMembers("node1", "node2", "node3")
	oldData := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}
	corrupt := model.Data{Kind: model.DataCorrupt, ClusterID: 0xc1, MemberID: 2, Reason: "walpb: crc mismatch"}
	noLeader := &model.Answer{MemberID: 2, ClusterID: 0xc1}
	oldMarker := &model.Marker{ClusterID: 0xc1, MemberID: 2}
	rejoining := model.Journal{Step: "start", Class: "repair"}
	blocked := func(l model.Local) model.Local {
		l.RepairBlocked, l.AddBlocked = "repair.maxPerHour (1) reached", "added 1 time in the last hour"
		return l
	}
	tests := []struct {
		name   string
		in     Input
		want   ActionKind
		reason string
		lock   bool // ReleaseLock
		move   bool // Start.MoveData
	}{
		// The source.
		{name: "source running, no leader for 3s, step requested: stop it",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, LeaderlessFor: FenceNoLeader, Recovery: recSource("requested", false)}},
			want: DoStopForRecovery, reason: "recovery r1 from node2: stopping etcd to restart it as a one-member cluster$"},
		{name: "source running silent for 3s, step requested: stop it",
			in:   Input{Local: model.Local{Running: true, SilentFor: FenceNoLeader, LeaderlessFor: FenceNoLeader, Recovery: recSource("requested", false)}},
			want: DoStopForRecovery, reason: "recovery r1 from node2: stopping etcd"},
		{name: "source from a snapshot running, no leader for 5s: stop it",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, LeaderlessFor: 5 * time.Second, Recovery: recSource("requested", true)}},
			want: DoStopForRecovery, reason: "recovery r1 from a snapshot on node2: stopping etcd"},
		{name: "source running, no leader for 1s (an election): wait, not stopped",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, LeaderlessFor: time.Second, Recovery: recSource("requested", false)}},
			want: DoWait, reason: "recovery r1 from node2: my member has had no leader for 1s; it is stopped only after 3s without one"},
		{name: "source running with a leader, no cluster seen: refused, not stopped",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1}, LeaderlessFor: 0, Recovery: recSource("requested", false)}},
			want: DoRefuseRecovery, reason: "recovery r1 from node2 refused: my member 2 has a leader (1): its cluster has a quorum and needs no recovery; nothing was changed"},
		{name: "source stopped, a healthy quorum of voters answers: refused",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("stopped", false)}, Cluster: healthyOnly("node1", "node3")},
			want: DoRefuseRecovery, reason: "recovery r1 from node2 refused: 2 of 3 voters of cluster c1 are healthy, a quorum: the cluster needs no recovery; nothing was changed"},
		{name: "source from a snapshot, a healthy quorum of voters answers: refused",
			in:   Input{Local: model.Local{Data: corrupt, Recovery: recSource("stopped", true)}, Cluster: healthyOnly("node1", "node3")},
			want: DoRefuseRecovery, reason: "recovery r1 from a snapshot on node2 refused: 2 of 3 voters"},
		{name: "source stopped, a cluster answers without a healthy quorum: force",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("stopped", false)}, Cluster: healthyOnly("node1")},
			want: DoForceNewCluster, reason: "(--force-new-cluster)$"},
		{name: "source stopped, corrupt data: refused",
			in:   Input{Local: model.Local{Data: corrupt, Recovery: recSource("stopped", false)}},
			want: DoRefuseRecovery, reason: "recovery r1 from node2 refused: the data dir is corrupt (walpb: crc mismatch), it cannot be the source; nothing was changed"},
		{name: "source stopped, empty data dir: refused",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, Recovery: recSource("requested", false)}},
			want: DoRefuseRecovery, reason: "refused: the data dir is empty"},
		{name: "source stopped, healthy data, no cluster answers: force a new cluster",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("stopped", false)}},
			want: DoForceNewCluster, reason: "recovery r1 from node2: starting etcd from its own data as a one-member cluster (--force-new-cluster)$"},
		{name: "source never running, step requested, healthy data: force at once",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("requested", false)}},
			want: DoForceNewCluster, reason: "as a one-member cluster (--force-new-cluster)$"},
		{name: "source from a snapshot, stopped: restore it, whatever the data dir holds",
			in:   Input{Local: model.Local{Data: corrupt, Recovery: recSource("stopped", true)}},
			want: DoRestoreSnapshot, reason: "recovery r1 from a snapshot on node2: restoring the snapshot as a new one-member cluster$"},
		{name: "source from a snapshot, killed after the move: the restore resumes",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, Recovery: recSource("moved", true)}},
			want: DoRestoreSnapshot, reason: "restoring the snapshot"},
		{name: "source forced, running as its own leader: done",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 2}, Recovery: recSource("forced", false)}},
			want: DoFinishRecovery, reason: "recovery r1 from node2: done, member 2 serves the recovered cluster", lock: true},
		{name: "source from a snapshot, forced, running as its own leader: done",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 0x77, ClusterID: 0xc2, Leader: 0x77}, Recovery: recSource("forced", true)}},
			want: DoFinishRecovery, reason: "recovery r1 from a snapshot on node2: done, member 77 serves", lock: true},
		{name: "source forced, running, no leader yet: wait",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, Recovery: recSource("forced", false)}},
			want: DoWait, reason: "recovery r1 from node2: waiting for etcd to serve as the leader of a one-member cluster"},
		{name: "source forced, running, a rejoined member leads: done (a voter with a leader)",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1}, Recovery: recSource("forced", false)}},
			want: DoFinishRecovery, reason: "done, member 2 serves the recovered cluster", lock: true},
		{name: "source forced, running silent: wait, never stopped",
			in:   Input{Local: model.Local{Running: true, SilentFor: ReadyDeadline + time.Second, Recovery: recSource("forced", false)}, Cluster: healthyOnly("node1", "node3")},
			want: DoWait, reason: "waiting for etcd to serve as the leader"},
		{name: "source forced, not running (crashed, killed): force again",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("forced", false)}},
			want: DoForceNewCluster, reason: "(--force-new-cluster)$"},
		// Once forced, the other members are gone from the cluster: the
		// refusals, which say nothing was changed, no longer apply.
		{name: "source forced, not running, a cluster that lists my member answers: start as it is, never force again (it would drop the members that rejoined), never refused",
			in:   Input{Local: model.Local{Data: corrupt, Recovery: recSource("forced", false)}, Cluster: healthyOnly("node1", "node3")},
			want: DoStart, reason: "lists my member 2: starting it as it is"},
		{name: "source forced, not running, a cluster that does not list my member answers: wait, never a second cluster next to it",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("forced", false)}, Cluster: healthyCluster("node1", "node3")},
			want: DoWait, reason: "does not list my member 2: not forcing a second cluster next to it"},
		{name: "source in restart backoff: wait",
			in: Input{Local: model.Local{RestartIn: 5 * time.Second, LastExit: &model.Exit{Text: "exit status 2", Class: "crash"}, Data: oldData,
				Recovery: recSource("forced", false)}},
			want: DoWait, reason: "recovery r1 from node2: restart backoff after exit status 2 (crash)"},
		{name: "source's recovery done: the ordinary decisions",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 2}, Recovery: recSource("done", false)}},
			want: DoNothing, reason: "node2 is a healthy voter (member 2, leader 2)", lock: true},
		{name: "source's recovery refused: the ordinary decisions",
			in:   Input{Local: model.Local{Data: oldData, Recovery: recSource("refused", false)}},
			want: DoStart, reason: "data dir holds a member; starting it as it is"},

		// A fenced host, running: its old member is stopped only while,
		// asked at this pass, it has had no leader for FenceNoLeader.
		{name: "fenced, running its old member, no leader for 3s: stop it for good",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, LeaderlessFor: FenceNoLeader, Marker: oldMarker, Recovery: recFence()}},
			want: DoStopForRecovery, reason: "fenced by recovery r1 from node1: my old member 2 has had no leader for 3s: stopping it for good; it rejoins the recovered cluster", lock: true},
		{name: "fenced, running its old member, no leader for 2.9s (an election): wait, not stopped",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, LeaderlessFor: 2900 * time.Millisecond, Marker: oldMarker, Recovery: recFence()}},
			want: DoWait, reason: "fenced by recovery r1 from node1: my member 2 has had no leader for 2.9s; it is stopped only after 3s without one"},
		{name: "fenced, running its old member, no leader at this very instant: wait, not stopped",
			in:   Input{Local: model.Local{Running: true, Answer: noLeader, Marker: oldMarker, Recovery: recFence()}},
			want: DoWait, reason: "has had no leader for 0s; it is stopped only after 3s"},
		{name: "fenced, running its old member with a leader (a fence on a healthy cluster): not stopped, the fence ends",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1}, Recovery: recFence()}},
			want: DoEndFence, reason: "my member 2 has a leader (1): its cluster has a quorum and needs no recovery; the fence is called off, the member keeps running"},
		{name: "fenced, running its old member with a leader after a long leaderless spell (the old cluster came back): the fence ends",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 3}, LeaderlessFor: 0, Marker: oldMarker, Recovery: recFence()}},
			want: DoEndFence, reason: "has a leader (3)"},
		{name: "fenced, running its old member as a learner with a leader: the fence ends",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, IsLearner: true}, Recovery: recFence()}},
			want: DoEndFence, reason: "has a leader (1)"},
		{name: "fenced, running silent for 3s, the marker names the old member: stop it",
			in:   Input{Local: model.Local{Running: true, SilentFor: FenceNoLeader, LeaderlessFor: FenceNoLeader, Marker: oldMarker, Recovery: recFence()}},
			want: DoStopForRecovery, reason: "stopping it for good", lock: true},
		{name: "fenced, running silent for 1s, the marker names the old member: wait",
			in:   Input{Local: model.Local{Running: true, SilentFor: time.Second, LeaderlessFor: time.Second, Marker: oldMarker, Recovery: recFence()}},
			want: DoWait, reason: "has had no leader for 1s"},
		{name: "fenced, running silent for 3s, no marker: stop it",
			in:   Input{Local: model.Local{Running: true, LeaderlessFor: 5 * time.Second, Recovery: recFence()}},
			want: DoStopForRecovery, reason: "stopping it for good", lock: true},
		{name: "fenced, a rejoin's new member starting silent (journal open): not stopped",
			in:   Input{Local: model.Local{Running: true, SilentFor: time.Second, Marker: oldMarker, Journal: rejoining, Recovery: recFence()}},
			want: DoWait, reason: "local etcd is not answering yet"},
		{name: "fenced, the new member restarting silent (marker names it): not stopped",
			in:   Input{Local: model.Local{Running: true, SilentFor: time.Second, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 9}, Recovery: recFence()}},
			want: DoWait, reason: "local etcd is not answering yet"},
		{name: "fenced, the new member is a learner: the ordinary promotion",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 9, Leader: 1, IsLearner: true}, Journal: model.Journal{Step: "promote", Class: "repair"}, Recovery: recFence()}},
			want: DoTakeLock, reason: "taking the cluster lock to promote learner 9"},
		{name: "fenced, the new member is a voter, rejoin open: the ordinary end of the rejoin first",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 9, Leader: 1}, Journal: model.Journal{Step: "promote", Class: "repair"}, Recovery: recFence()}},
			want: DoFinishRejoin, reason: "rejoin finished: node2 is a healthy voter", lock: true},
		{name: "fenced, the new member is a voter with a leader, rejoin closed: done",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 9, Leader: 1}, Journal: model.Journal{Step: "done"}, Recovery: recFence()}},
			want: DoFinishRecovery, reason: "recovery r1: done here, member 9 is a voter of the recovered cluster", lock: true},
		{name: "fenced, the new member has no leader: the ordinary wait",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 9}, Recovery: recFence()}},
			want: DoWait, reason: "local member has no leader"},

		// A fenced host, stopped: fenceStart.
		{name: "fenced, stopped, no cluster answers: wait, never start the old member",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: recFence()}},
			want: DoWait, reason: "waiting: fenced by recovery r1 from node1: never starting my old member; waiting for the recovered cluster to answer", lock: true},
		{name: "fenced, stopped, the old cluster answers without a quorum, the source not healthy: wait",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: recFence()}, Cluster: healthyOnly("node3")},
			want: DoWait, reason: "the cluster that answers (c1) does not list node1 as a healthy member: waiting for the recovered cluster", lock: true},
		// A fence on a cluster that has a quorum: no recovery happened.
		{name: "fenced, stopped, the old cluster answers with a quorum and lists my old member: the fence ends",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: recFence()}, Cluster: healthyOnly("node1", "node3")},
			want: DoEndFence, reason: "fenced by recovery r1 from node1: cluster c1 has a quorum (2 of 3 voters healthy) and lists my member 2: no recovery is needed; the fence is called off, the member starts again"},
		{name: "fenced, stopped, the old cluster with a quorum, the source down: the fence ends",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: recFence()}, Cluster: healthyOnly("node2", "node3")},
			want: DoEndFence, reason: "has a quorum (2 of 3 voters healthy)"},
		{name: "fence ended (aborted): the ordinary start",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: func() model.Recovery { r := recFence(); r.Step = "aborted"; return r }()}, Cluster: healthyOnly("node1", "node3")},
			want: DoStart, reason: "starting it as it is"},
		{name: "fenced, stopped, a cluster without the source at all: wait",
			in: Input{Local: model.Local{Data: oldData, Recovery: recFence()},
				Cluster: &model.Cluster{ClusterID: 0xc1, LeaderID: 3, Members: []model.Member{mv(3, "node3", "http://127.0.0.3:2380", true)}}},
			want: DoWait, reason: "does not list node1 as a healthy member", lock: true},
		{name: "fenced, stopped, the recovered cluster still lists the old member: wait",
			in: Input{Local: model.Local{Data: oldData, Recovery: recFence()},
				Cluster: func() *model.Cluster {
					c := recovered(0xc1, 1)
					c.Members = append(c.Members, mv(2, "node2", "http://127.0.0.2:2380", false))
					return c
				}()},
			want: DoWait, reason: "the recovered cluster still lists it (2): waiting", lock: true},
		{name: "fenced, stopped in restart backoff: wait",
			in:   Input{Local: model.Local{RestartIn: time.Second, LastExit: &model.Exit{Text: "signal: killed", Class: "killed"}, Data: oldData, Recovery: recFence()}, Cluster: recovered(0xc1, 1)},
			want: DoWait, reason: "restart backoff after signal: killed"},
		// The operator asked for the recovery: the repair rate limit does
		// not hold the rejoin back.
		{name: "fenced, the recovered cluster lists the source, corrupt data, rate limited: take the lock to rejoin",
			in:   Input{Local: blocked(model.Local{Data: corrupt, Marker: oldMarker, Recovery: recFence()}), Cluster: recovered(0xc1, 1)},
			want: DoTakeLock, reason: "taking the cluster lock to rejoin: data is corrupt: walpb: crc mismatch$", move: true},
		{name: "fenced, the recovered cluster lists the source, corrupt data, rate limited, lock held: rejoin",
			in:   Input{Local: blocked(model.Local{Data: corrupt, Marker: oldMarker, LockHeld: true, Recovery: recFence()}), Cluster: recovered(0xc1, 1)},
			want: DoRejoin, reason: "rejoining: data is corrupt: walpb: crc mismatch$", move: true},
		{name: "fenced, the old member's healthy data, rate limited, lock held: rejoin, the data moved aside",
			in:   Input{Local: blocked(model.Local{Data: oldData, Marker: oldMarker, LockHeld: true, Recovery: recFence()}), Cluster: recovered(0xc1, 1)},
			want: DoRejoin, reason: "data dir holds member 2 of cluster c1, which the live cluster c1 does not list", move: true},
		{name: "fenced, empty data dir, adds rate limited, lock held: rejoin",
			in:   Input{Local: blocked(model.Local{Data: model.Data{Kind: model.DataEmpty}, Marker: oldMarker, LockHeld: true, Recovery: recFence()}), Cluster: recovered(0xc1, 1)},
			want: DoRejoin, reason: "data dir is empty and the cluster is live: joining it$"},
		{name: "not fenced: the same corrupt data waits for the rate limit",
			in:   Input{Local: blocked(model.Local{Data: corrupt, Marker: oldMarker, LockHeld: true}), Cluster: recovered(0xc1, 1)},
			want: DoWait, reason: "data is corrupt: walpb: crc mismatch; not repairing: repair.maxPerHour (1) reached", lock: true},
		// Restored from a snapshot, the recovered cluster has a new ID;
		// the fenced host's data and marker still name the old one.
		{name: "fenced, data of the old cluster, the recovered cluster has a new ID: rejoin",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, LockHeld: true, Recovery: recFence()}, Cluster: recovered(0xc2, 0x71)},
			want: DoRejoin, reason: "data dir holds member 2 of cluster c1, which the live cluster c2 does not list", move: true},
		{name: "fenced, the old cluster not known, data of another cluster ID: rejoin",
			in: Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: func() model.Recovery { r := recFence(); r.OldClusterID = 0; return r }()},
				Cluster: recovered(0xc2, 0x71)},
			want: DoTakeLock, reason: "taking the cluster lock to rejoin: data dir holds member 2 of cluster c1", move: true},
		{name: "fenced, an empty data dir and the old cluster's marker, new ID: rejoin",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, Marker: oldMarker, LockHeld: true, Recovery: recFence()}, Cluster: recovered(0xc2, 0x71)},
			want: DoRejoin, reason: "data dir is empty and the cluster is live: joining it$"},
		{name: "fenced, data of a third cluster: still the otherCluster wait",
			in: Input{Local: model.Local{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xdead, MemberID: 2}, LockHeld: true, Recovery: recFence()},
				Cluster: recovered(0xc2, 0x71)},
			want: DoWait, reason: "the peers answer for cluster c2, but the data dir belongs to cluster dead", lock: true},
		{name: "not fenced, data of the old cluster, a cluster with a new ID: the otherCluster wait",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, LockHeld: true}, Cluster: recovered(0xc2, 0x71)},
			want: DoWait, reason: "the peers answer for cluster c2, but the data dir belongs to cluster c1", lock: true},
		{name: "not fenced, empty data dir and the old cluster's marker, a new ID: the otherCluster wait",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, Marker: oldMarker, LockHeld: true}, Cluster: recovered(0xc2, 0x71)},
			want: DoWait, reason: "this host's marker belongs to cluster c1", lock: true},
		{name: "fence over (done): the ordinary start",
			in:   Input{Local: model.Local{Data: oldData, Marker: oldMarker, Recovery: func() model.Recovery { r := recFence(); r.Step = "done"; return r }()}},
			want: DoStart, reason: "data dir holds a member; starting it as it is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.reason == "" {
				t.Fatal("row without reason: name the part of the reason that only the intended rule gives")
			}
			in := tt.in
			in.Self, in.Desired, in.InSpec = desired[1], desired, true
			got := Decide(in)
			if got.Kind != tt.want || !reasonHas(got.Reason, tt.reason) || got.ReleaseLock != tt.lock {
				t.Errorf("Decide = %s %q (release lock %v), want %s with %q (release lock %v)",
					got.Kind, got.Reason, got.ReleaseLock, tt.want, tt.reason, tt.lock)
			}
			if got.Start.MoveData != tt.move {
				t.Errorf("move data = %v, want %v (%s)", got.Start.MoveData, tt.move, got.Reason)
			}
			if (got.Kind == DoRejoin || got.Kind == DoTakeLock && strings.HasPrefix(got.Key, "lock/rejoin")) && got.Start.Action != ActRejoin {
				t.Errorf("start action = %s, want rejoin", got.Start.Action)
			}
			if got.Key == "" {
				t.Errorf("no key")
			}
			if strings.Count(got.Reason, "waiting:") > 1 {
				t.Errorf("reason says waiting twice: %q", got.Reason)
			}
		})
	}
}

// TestFenceStartOnlyFences: DecideStart's fence holds a fenced host with
// an open recovery only; the source's own recovery, or a fence that is
// over, leaves the ordinary start.
func TestFenceStartOnlyFences(t *testing.T) {
	healthy := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}
	over := recFence()
	over.Step = "done"
	refused := recFence()
	refused.Step = "refused"
	tests := []struct {
		name       string
		fence      model.Recovery
		want       StartAction
		reasonPart string
	}{
		{name: "fenced, open: never started", fence: recFence(), want: ActWait, reasonPart: "fenced by recovery r1 from node1: never starting my old member"},
		{name: "the source's own recovery: no fence", fence: recSource("forced", false), want: ActStartAsIs, reasonPart: "data dir holds a member; starting it as it is$"},
		{name: "fence over (done): no fence", fence: over, want: ActStartAsIs, reasonPart: "data dir holds a member; starting it as it is$"},
		{name: "fence refused: no fence", fence: refused, want: ActStartAsIs, reasonPart: "data dir holds a member; starting it as it is$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideStart(StartInput{Self: self, InSpec: true, SpecSize: 3, Data: healthy, Fence: tt.fence})
			if d.Action != tt.want || !reasonHas(d.Reason, tt.reasonPart) {
				t.Errorf("DecideStart = %s (%s), want %s with %q", d.Action, d.Reason, tt.want, tt.reasonPart)
			}
		})
	}
}
