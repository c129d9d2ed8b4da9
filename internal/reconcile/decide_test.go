package reconcile

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func specMembers(names ...string) []spec.Member {
	var out []spec.Member
	for _, n := range names {
		ip := "127.0.0." + strings.TrimPrefix(n, "node")
		out = append(out, spec.Member{Name: n, PeerURLs: []string{"http://" + ip + ":2380"}, ClientURLs: []string{"http://" + ip + ":2379"}})
	}
	return out
}

func healthyCluster(names ...string) *model.Cluster {
	c := &model.Cluster{ClusterID: 0xc1, LeaderID: 1}
	for _, m := range specMembers(names...) {
		id, _ := strconv.ParseUint(strings.TrimPrefix(m.Name, "node"), 10, 64)
		c.Members = append(c.Members, model.Member{ID: id, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Healthy: true, CaughtUp: true, Leader: 1})
	}
	return c
}

// TestDecide covers the one decision per pass, a row per guard clause.
// Each row names the action and a part of the reason it must give.
func TestDecide(t *testing.T) {
	desired := specMembers("node1", "node2", "node3")
	voter := &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}
	withExtra := healthyCluster("node1", "node2", "node3", "node4")
	tests := []struct {
		name   string
		in     Input
		want   ActionKind
		reason string
		lock   bool // ReleaseLock
	}{
		{name: "backoff after a crash",
			in:   Input{Local: model.Local{RestartIn: time.Second, LastExit: &model.Exit{Text: "exit status 1", Class: "unknown"}}},
			want: DoWait, reason: "restart backoff after exit status 1"},
		{name: "never-joined host, nobody answers: form the cluster",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}}},
			want: DoStart, reason: "forming the cluster from the spec"},
		{name: "healthy data: start as it is",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoStart, reason: "starting it as it is"},
		{name: "start-path wait releases the lock",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataLocked, Reason: "flock"}, LockHeld: true}},
			want: DoWait, reason: "locked by another process", lock: true},
		{name: "empty data, live cluster, no lock: take it first",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}}, Cluster: healthyCluster("node1", "node3")},
			want: DoTakeLock, reason: "joining it"},
		{name: "empty data, live cluster, lock held: rejoin",
			in:   Input{Local: model.Local{Data: model.Data{Kind: model.DataEmpty}, LockHeld: true}, Cluster: healthyCluster("node1", "node3")},
			want: DoRejoin, reason: "joining it"},
		{name: "not in the spec and not a member: idle",
			in:   Input{InSpec: false, Local: model.Local{Data: model.Data{Kind: model.DataEmpty}}, Cluster: healthyCluster("node1", "node3")},
			want: DoIdle, reason: "not in the spec", lock: true},
		{name: "starting etcd, silent for a while",
			in:   Input{Local: model.Local{Running: true, SilentFor: 10 * time.Second}},
			want: DoWait, reason: "not answering yet"},
		{name: "silent past the deadline, peers healthy: stop it",
			in:   Input{Local: model.Local{Running: true, SilentFor: ReadyDeadline + time.Second}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoStopStuck, reason: "not answering for 1m31s"},
		{name: "silent past the deadline while an agent defragments it: not stopped",
			in:   Input{Local: model.Local{Running: true, SilentFor: ReadyDeadline + time.Second, StillFor: StillDeadline, DefragmentedBy: "node2"}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoWait, reason: "while agent node2 defragments it"},
		{name: "stopped (SIGSTOP) while recorded as defragmented: stopped all the same",
			in:   Input{Local: model.Local{Running: true, SilentFor: ReadyDeadline + time.Second, StoppedFor: StoppedGrace, DefragmentedBy: "node2"}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoStopStuck, reason: "state T"},
		{name: "silent past the deadline, no quorum without it",
			in:   Input{Local: model.Local{Running: true, SilentFor: ReadyDeadline + time.Second}},
			want: DoWait, reason: "no healthy quorum without it"},
		{name: "joining learner lost etcd's publish race: restart its etcd",
			in:   Input{Local: model.Local{Running: true, LostPublishRace: true, ListedAsLearner: true, LockHeld: true, Journal: model.Journal{Step: "promote", Class: "join"}}},
			want: DoRestartStalled, reason: "would wait out etcd's 7 s publish timeout"},
		{name: "publish stall of a member listed as a voter: never restarted",
			in:   Input{Local: model.Local{Running: true, LostPublishRace: true, Journal: model.Journal{Step: "promote", Class: "repair"}}},
			want: DoWait, reason: "not restarting a member that is not a joining learner"},
		{name: "publish stall outside a rejoin (a learner's restart as it is): never restarted",
			in:   Input{Local: model.Local{Running: true, LostPublishRace: true, ListedAsLearner: true}},
			want: DoWait, reason: "not restarting a member that is not a joining learner"},
		{name: "CORRUPT alarm on this member, the others have quorum",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOn(2, nil)},
			want: DoStopForRepair, reason: "CORRUPT alarm on member 2"},
		// node3 down for maintenance, a CORRUPT alarm naming node2: stopping
		// node2 would leave node1 alone. It keeps running (reads are served).
		{name: "CORRUPT alarm on this member, a peer is down",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOn(2, []uint64{3})},
			want: DoWait, reason: "not stopping it while the others have 1 of 2 voters caught up", lock: true},
		// Raft's quorum of four is three: with node3 down, stopping node2
		// would leave two. A quorum of the three others (two) is not enough.
		{name: "CORRUPT alarm on this member of four, a peer is down",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOnOf([]string{"node1", "node2", "node3", "node4"}, 2, []uint64{3})},
			want: DoWait, reason: "not stopping it while the others have 2 of 3 voters caught up (quorum 3)", lock: true},
		{name: "CORRUPT alarm on this member of two: the other alone is no quorum",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOnOf([]string{"node1", "node2"}, 2, nil)},
			want: DoWait, reason: "not stopping it while the others have 1 of 1 voters caught up (quorum 2)", lock: true},
		{name: "CORRUPT alarm on this member of four, the others up",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOnOf([]string{"node1", "node2", "node3", "node4"}, 2, nil)},
			want: DoStopForRepair, reason: "CORRUPT alarm on member 2"},
		{name: "CORRUPT alarm on this member, cluster not observed",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}},
			want: DoWait, reason: "cannot observe the cluster", lock: true},
		{name: "an endpoint answers for another cluster: no change",
			in:   Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: foreignCluster(), Agents: []model.AgentRecord{}},
			want: DoWait, reason: "disagree on its ID", lock: true},
		// etcd raises CORRUPT for member 0 when its hash check found a
		// mismatch but no majority: the whole cluster is suspect. Never
		// disarm that, and change nothing.
		{name: "a CORRUPT alarm names member 0: wait for a human",
			in:   Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: alarmOnGone(0)},
			want: DoWait, reason: "the whole cluster is suspect", lock: true},
		// A voter that took the lock to restart, then found a peer down,
		// gives the lock back: the peer's repair may need it.
		{name: "settings changed, lock held, a peer down: give the lock back",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Cluster: downCluster()},
			want: DoWait, reason: "rollout held: node3 is not a healthy voter", lock: true},
		{name: "CORRUPT alarm on this member, a peer is down, lock held: give it back",
			in:   Input{Local: model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 2, Type: "CORRUPT"}}}}, Cluster: corruptOn(2, []uint64{3})},
			want: DoWait, reason: "not stopping it while the others have", lock: true},
		{name: "an alarm names a member that is gone: disarm it",
			in:   Input{Local: model.Local{Running: true, Answer: voter}, Cluster: alarmOnGone(0x77)},
			want: DoDisarm, reason: "disarm CORRUPT alarm of member 77, which is no longer in the cluster", lock: true},
		{name: "CORRUPT alarm on another member",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Alarms: []model.Alarm{{MemberID: 3, Type: "CORRUPT"}}}}},
			want: DoNothing, reason: "healthy voter", lock: true},
		{name: "no leader",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2}}},
			want: DoWait, reason: "no leader"},
		// Promotion takes the lock that a stale-learner removal takes: the
		// two never race (a just-promoted voter removed as a "stale learner").
		{name: "learner without the lock: take it to promote",
			in:   Input{Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, IsLearner: true}}},
			want: DoTakeLock, reason: "to promote learner 2"},
		{name: "learner holding the lock: promote",
			in:   Input{Local: model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 2, Leader: 1, IsLearner: true}}},
			want: DoPromote, reason: "promoting learner 2"},
		{name: "peer URL update while an agent runs another spec",
			in: Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: movedURL(), Generation: "new",
				Agents: []model.AgentRecord{{Name: "node3", Generation: "old", Members: []string{"node1", "node2", "node3"}}}},
			want: DoWait, reason: "agent node3 runs spec generation old", lock: true},
		{name: "peer URL update when every agent runs this spec",
			in: Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: movedURL(), Generation: "new",
				Agents: []model.AgentRecord{{Name: "node3", Generation: "new", Members: []string{"node1", "node2", "node3"}}}},
			want: DoChangeMembership, reason: "update-peer-urls node3", lock: true},
		{name: "voter with an open journal: finish the rejoin",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Journal: model.Journal{Step: "promote"}}},
			want: DoFinishRejoin, reason: "rejoin finished", lock: true},
		{name: "settings changed, lock not held",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoTakeLock, reason: "to restart: changed settings"},
		{name: "settings changed, lock held: restart",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, Memory: model.Memory{RolloutSnapshot: "g2: changed settings"}, Cluster: healthyCluster("node1", "node2", "node3"), Generation: "g2"},
			want: DoRestart, reason: "spec g2"},
		{name: "settings changed, the others have no quorum",
			in:   Input{Local: model.Local{Running: true, Answer: voter, Restart: model.Restart{Why: "changed settings"}}, Cluster: downCluster()},
			want: DoWait, reason: "rollout held: node3 is not a healthy voter", lock: true},
		{name: "membership matches",
			in:   Input{Local: model.Local{Running: true, Answer: voter}, Cluster: healthyCluster("node1", "node2", "node3")},
			want: DoNothing, reason: "node2 is a healthy voter", lock: true},
		{name: "a learner of the spec: its agent promotes it",
			in:   Input{Local: model.Local{Running: true, Answer: voter}, Cluster: withLearner()},
			want: DoWait, reason: "node3 is a learner", lock: true},
		{name: "an extra member, no lock: take it",
			in:   Input{Local: model.Local{Running: true, Answer: voter}, Cluster: withExtra, Agents: []model.AgentRecord{}},
			want: DoTakeLock, reason: "remove node4"},
		{name: "an extra member, lock held: remove it",
			in:   Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: withExtra, Agents: []model.AgentRecord{}},
			want: DoChangeMembership, reason: "changed membership: remove node4", lock: true},
		{name: "an agent's older spec still lists it",
			in: Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: withExtra, Generation: "new",
				Agents: []model.AgentRecord{{Name: "node4", Generation: "old", Members: []string{"node1", "node2", "node3", "node4"}}}},
			want: DoWait, reason: "agent node4 runs spec generation old, which still lists it", lock: true},
		{name: "agents unknown: no removal",
			in:   Input{Local: model.Local{Running: true, Answer: voter, LockHeld: true}, Cluster: withExtra},
			want: DoWait, reason: "cannot read the agents' specs", lock: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Self, in.Desired = desired[1], desired
			if tt.name != "not in the spec and not a member: idle" {
				in.InSpec = true
			}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) || got.ReleaseLock != tt.lock {
				t.Errorf("Decide = %s %q (release lock %v), want %s containing %q (release lock %v)",
					got.Kind, got.Reason, got.ReleaseLock, tt.want, tt.reason, tt.lock)
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

func downCluster() *model.Cluster {
	c := healthyCluster("node1", "node2", "node3")
	c.Members[2].Healthy = false
	return c
}

// TestDecideKeyIgnoresDurations: the key, by which the agent decides
// whether to log, stays while only a duration in the reason changes, and
// changes when a count does.
func TestDecideKeyIgnoresDurations(t *testing.T) {
	desired := specMembers("node1", "node2", "node3", "node4")
	c := healthyCluster("node1", "node2", "node3")
	c.Members = append(c.Members, model.Member{ID: 9, Name: "node4", IsLearner: true, PeerURLs: desired[3].PeerURLs, Healthy: true})
	in := Input{Self: desired[1], InSpec: true, Desired: desired, LearnerTimeout: time.Hour,
		Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1}}, Cluster: c, Agents: []model.AgentRecord{}}
	c.Now = time.Unix(100, 0)
	c.Members[3].PendingSince = time.Unix(40, 0)
	first := Decide(in)
	c.Now = time.Unix(175, 0)
	second := Decide(in)
	if first.Reason == second.Reason {
		t.Fatalf("the reasons do not differ (%q): the test proves nothing", first.Reason)
	}
	if first.Key != second.Key {
		t.Errorf("key changed with a duration: %q -> %q", first.Key, second.Key)
	}
	if a, b := stableKey("1 of 3 voters healthy"), stableKey("2 of 3 voters healthy"); a == b {
		t.Errorf("a count change kept the key %q", a)
	}
}

// corruptOn is a healthy 3-member cluster with a CORRUPT alarm on member
// id, and the members down are down.
func corruptOn(id uint64, down []uint64) *model.Cluster {
	return corruptOnOf([]string{"node1", "node2", "node3"}, id, down)
}

// corruptOnOf is corruptOn for a cluster of the members named.
func corruptOnOf(names []string, id uint64, down []uint64) *model.Cluster {
	c := healthyCluster(names...)
	c.Alarms = []model.Alarm{{MemberID: id, Type: model.AlarmCorrupt}}
	for i := range c.Members {
		m := &c.Members[i]
		if m.ID == id {
			m.Alarms = c.Alarms
			m.Healthy = false
		}
		if slices.Contains(down, m.ID) {
			m.Healthy = false
		}
	}
	return c
}

func alarmOnGone(id uint64) *model.Cluster {
	c := healthyCluster("node1", "node2", "node3")
	c.Alarms = []model.Alarm{{MemberID: id, Type: model.AlarmCorrupt}}
	return c
}

// movedURL: node3 still advertises an old peer URL.
func movedURL() *model.Cluster {
	c := healthyCluster("node1", "node2", "node3")
	c.Members[2].PeerURLs = []string{"http://127.0.0.99:2380"}
	return c
}

func withLearner() *model.Cluster {
	c := healthyCluster("node1", "node2", "node3")
	c.Members[2].IsLearner = true
	return c
}

// foreignCluster has an extra member due for removal, and an endpoint
// that answers for another cluster.
func foreignCluster() *model.Cluster {
	c := healthyCluster("node1", "node2", "node3", "node4")
	c.Foreign = []string{"http://127.0.0.4:2379 answers for cluster beef, not c1"}
	return c
}
