package reconcile

import (
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// decideRow is a row of the tables below: the input, the action and a
// part of the reason only the intended rule gives.
type decideRow struct {
	name   string
	in     Input
	want   ActionKind
	reason string
	start  StartAction // for DoStart: as it is or new
}

func runDecideRows(t *testing.T, self string, rows []decideRow) {
	t.Helper()
	desired := specMembers("node1", "node2", "node3")
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Self, in.Desired, in.InSpec = specMembers(self)[0], desired, true
			got := Decide(in)
			if got.Kind != tt.want || !reasonHas(got.Reason, tt.reason) {
				t.Errorf("Decide = %s %q, want %s with %q", got.Kind, got.Reason, tt.want, tt.reason)
			}
			if got.Kind == DoStart && got.Start.Action != tt.start {
				t.Errorf("start action = %s, want %s (%s)", got.Start.Action, tt.start, got.Reason)
			}
			if got.Key == "" {
				t.Errorf("no key")
			}
		})
	}
}

// TestForcedAtMostOnce: the source of a recovery whose journal still says
// forced (its finish, or the journal write, kept failing) and that sees no
// cluster forces again only while its data shows the forced start never
// took: once the journal says it led, or the data lists members other
// than the ones it was forced from (the others removed, new ones joined),
// it starts as it is. Never a second --force-new-cluster next to the
// members that joined (F5).
func TestForcedAtMostOnce(t *testing.T) {
	forcedFrom := func(step string, from ...uint64) model.Recovery {
		r := recSource(step, false)
		r.ForcedFrom = from
		return r
	}
	data := func(members ...uint64) model.Data {
		return model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2, Members: members}
	}
	rows := []decideRow{
		{name: "forced, the data lists the members it was forced from: the forced start never took, force again",
			in:   Input{Local: model.Local{Data: data(1, 2, 3), Recovery: forcedFrom("forced", 1, 2, 3)}},
			want: DoForceNewCluster, reason: "(--force-new-cluster)$"},
		{name: "forced, members unknown (not read): force again, as before",
			in:   Input{Local: model.Local{Data: data(), Recovery: forcedFrom("forced", 1, 2, 3)}},
			want: DoForceNewCluster, reason: "(--force-new-cluster)$"},
		{name: "forced, the data lists my member alone: it took, start as it is",
			in:   Input{Local: model.Local{Data: data(2), Recovery: forcedFrom("forced", 1, 2, 3)}},
			want: DoStart, start: ActStartAsIs, reason: "my data lists my member 2 alone: the forced start took: starting it as it is, never forcing twice$"},
		{name: "forced, others joined since (3 members listed, 2 new), no cluster in sight: start as it is, never force",
			in:   Input{Local: model.Local{Data: data(2, 0x77, 0x78), Recovery: forcedFrom("forced", 1, 2, 3)}},
			want: DoStart, start: ActStartAsIs, reason: "my data lists members 77, 78, which joined after the forced start: starting it as it is, never forcing twice$"},
		{name: "forced, a journal that does not say what it was forced from, others listed: never force twice",
			in:   Input{Local: model.Local{Data: data(1, 2, 3), Recovery: forcedFrom("forced")}},
			want: DoStart, start: ActStartAsIs, reason: "my data lists members 1, 3 besides mine and the journal does not say which it was forced from"},
		{name: "led (the finish failed after): start as it is, whatever the data lists",
			in:   Input{Local: model.Local{Data: data(1, 2, 3), Recovery: forcedFrom("led", 1, 2, 3)}},
			want: DoStart, start: ActStartAsIs, reason: "the journal says the forced start led already: starting it as it is"},
		{name: "led, running as a voter with a leader: finish again",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 2}, Recovery: forcedFrom("led", 1, 2, 3)}},
			want: DoFinishRecovery, reason: "done, member 2 serves the recovered cluster"},
		{name: "led, running without a leader: wait, never stopped",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1}, Recovery: forcedFrom("led", 1, 2, 3)}},
			want: DoWait, reason: "waiting for etcd to serve as the leader of a one-member cluster"},
		{name: "led, a cluster that lists my member answers: start as it is",
			in:   Input{Local: model.Local{Data: data(1, 2, 3), Recovery: forcedFrom("led", 1, 2, 3)}, Cluster: healthyOnly("node1", "node3")},
			want: DoStart, start: ActStartAsIs, reason: "lists my member 2: starting it as it is"},
		{name: "led, a healthy quorum of another cluster answers: never refused (something was changed), never forced",
			in:   Input{Local: model.Local{Data: data(2), Recovery: forcedFrom("led", 1, 2, 3)}, Cluster: healthyCluster("node1", "node3")},
			want: DoWait, reason: "does not list my member 2: not forcing a second cluster next to it"},
		{name: "restored from a snapshot, forced: the restored data lists my member alone: start as it is",
			in: Input{Local: model.Local{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xc2, MemberID: 0x71, Members: []uint64{0x71}},
				Recovery: func() model.Recovery { r := recSource("forced", true); return r }()}},
			want: DoStart, start: ActStartAsIs, reason: "my data lists my member 71 alone"},
	}
	runDecideRows(t, "node2", rows)
}

// TestStateDirUnwritable: a state dir that cannot be written holds back
// only what needs the marker: forming a new cluster. A learner is still
// promoted, a rejoin still finished (and the lock released) (F6).
func TestStateDirUnwritable(t *testing.T) {
	const full = "write /var/lib/etcdkeeper/member.json: no space left on device"
	learner := &model.Answer{MemberID: 9, ClusterID: 0xc1, Leader: 1, IsLearner: true}
	voter := &model.Answer{MemberID: 9, ClusterID: 0xc1, Leader: 1}
	rows := []decideRow{
		{name: "a learner, lock held: promoted",
			in:   Input{Local: model.Local{Running: true, Answer: learner, LockHeld: true, Journal: model.Journal{Step: "promote", Class: "join"}, StateDirError: full}},
			want: DoPromote, reason: "promoting learner 9"},
		{name: "a learner, no lock: take it",
			in:   Input{Local: model.Local{Running: true, Answer: learner, Journal: model.Journal{Step: "promote", Class: "join"}, StateDirError: full}},
			want: DoTakeLock, reason: "to promote learner 9"},
		{name: "a voter, rejoin open: finished",
			in:   Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true, Journal: model.Journal{Step: "promote", Class: "join"}, StateDirError: full}},
			want: DoFinishRejoin, reason: "rejoin finished"},
		{name: "never-joined host, nobody answers: not forming a cluster it could not record",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, StateDirError: full}},
			want: DoWait, reason: "not forming a new cluster while the state dir cannot be written (" + full + "): "},
		{name: "healthy data: started as it is (the data is the proof)",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}, StateDirError: full}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoStart, start: ActStartAsIs, reason: "starting it as it is"},
	}
	runDecideRows(t, "node2", rows)
	got := Decide(Input{Self: specMembers("node2")[0], InSpec: true, Desired: specMembers("node1", "node2", "node3"),
		Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, StateDirError: full, LockHeld: true}})
	if !got.ReleaseLock {
		t.Errorf("the wait for the state dir keeps the lock: %+v", got)
	}
}

// TestAwayWithoutLeader: a host that was away runs its old member while
// the recovered cluster has no leader. Once that member has had no leader
// for NoLeaderLook and a cluster of another ID answers at the spec's
// other members with a record naming its cluster, it takes its part as a
// fenced host; an exit etcd classified as removed is not restarted while
// no cluster answers (F9).
func TestAwayWithoutLeader(t *testing.T) {
	old := &model.Answer{MemberID: 3, ClusterID: 0xc1}
	recovered := func(oldCluster uint64) *model.Cluster {
		c := healthyCluster("node1", "node2")
		c.ClusterID = 0xc2
		c.Recovered = &model.Recovered{ID: "r1", Source: "node1", OldClusterID: oldCluster, ClusterID: 0xc2}
		return c
	}
	sameID := healthyCluster("node1", "node2")
	sameID.Recovered = &model.Recovered{ID: "r1", Source: "node1", OldClusterID: 0xc1, ClusterID: 0xc1}
	removed := &model.Exit{Text: "exit status 0", Class: classRemoved, Reason: "this member was removed from the cluster or has another cluster's identity"}
	oldData := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 3, Members: []uint64{1, 2, 3}}
	rows := []decideRow{
		{name: "no leader for a moment: wait",
			in:   Input{Local: model.Local{Running: true, Answer: old, LeaderlessFor: time.Second}, Cluster: recovered(0xc1)},
			want: DoWait, reason: "local member has no leader"},
		{name: "no leader for long, the recovered cluster's record names my cluster: fence",
			in:   Input{Local: model.Local{Running: true, Answer: old, LeaderlessFor: NoLeaderLook}, Cluster: recovered(0xc1)},
			want: DoAcceptFence, reason: "recovered from node1 (recovery r1) while this host was away"},
		{name: "no leader for long, a record about another cluster: wait",
			in:   Input{Local: model.Local{Running: true, Answer: old, LeaderlessFor: time.Hour}, Cluster: recovered(0xc9)},
			want: DoWait, reason: "local member has no leader"},
		{name: "no leader for long, no cluster answers: wait",
			in:   Input{Local: model.Local{Running: true, Answer: old, LeaderlessFor: time.Hour}},
			want: DoWait, reason: "local member has no leader"},
		{name: "no leader for long, my own cluster answers with a record of an old recovery: wait, never fenced on it",
			in:   Input{Local: model.Local{Running: true, Answer: old, LeaderlessFor: time.Hour}, Cluster: sameID},
			want: DoWait, reason: "local member has no leader"},
		{name: "removed exit, no cluster answers: not restarted",
			in:   Input{Local: model.Local{Data: oldData, LastExit: removed}},
			want: DoWait, reason: "etcd said my member was removed from the cluster (this member was removed"},
		{name: "removed exit, the cluster answers without my member: rejoin",
			in:   Input{Local: model.Local{Data: oldData, LastExit: removed, Marker: &model.Marker{ClusterID: 0xc1, MemberID: 3}}, Cluster: healthyCluster("node1", "node2")},
			want: DoTakeLock, reason: "taking the cluster lock to rejoin"},
		{name: "another exit, no cluster answers: started as before",
			in:   Input{Local: model.Local{Data: oldData, LastExit: &model.Exit{Text: "exit status 1", Class: "unknown"}}},
			want: DoStart, start: ActStartAsIs, reason: "starting it as it is"},
	}
	runDecideRows(t, "node3", rows)
}
