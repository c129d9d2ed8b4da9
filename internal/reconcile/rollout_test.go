package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestRollingRestart covers the one rule for a member that must restart
// (rollingRestart), a row per rule: the hold on a member that did not come
// back, the caught-up quorum, the leader last with its leadership moved
// first, the lock, the rollout's snapshot, and the lock kept by a
// restarted member until it has caught up.
func TestRollingRestart(t *testing.T) {
	three := []string{"node1", "node2", "node3"}
	up := "etcd 3.6.16 → 3.7.3"
	key := "g2: " + up
	follower := &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}
	leader := &model.Answer{MemberID: 1, ClusterID: 0xc1, Leader: 1}
	due := model.Restart{Why: up}
	// rec is an agent record of spec generation g2.
	rec := func(name, pending string) model.AgentRecord {
		return model.AgentRecord{Name: name, Generation: "g2", Members: three, RestartPending: pending}
	}
	crashed := func(m *model.Member) { m.Healthy, m.Err = false, "connection refused" }
	tests := []struct {
		name    string
		self    string
		local   model.Local
		mem     model.Memory
		cluster *model.Cluster
		agents  []model.AgentRecord
		paused  bool
		want    ActionKind
		reason  string
		release bool
		check   func(t *testing.T, a Action)
	}{
		{name: "no view of the cluster: wait, give the lock back",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true},
			want:  DoWait, reason: "cannot observe the cluster", release: true},
		{name: "a member that did not come back holds the rollout, and says what its agent says",
			local:   model.Local{Running: true, Answer: follower, Restart: due},
			cluster: clusterWith(three, map[uint64]memberMod{3: crashed}),
			agents:  []model.AgentRecord{rec("node1", up), {Name: "node3", Generation: "g2", Decision: "waiting: restart backoff after exit status 1 (unknown)"}},
			want:    DoWait, reason: "rollout held: node3 is not a healthy voter (connection refused); its agent: waiting: restart backoff after exit status 1", release: true},
		{name: "a five-member cluster holds on a member down too (the others keep their version)",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: clusterWith([]string{"node1", "node2", "node3", "node4", "node5"}, map[uint64]memberMod{4: crashed}),
			want:    DoWait, reason: "rollout held: node4 is not a healthy voter", release: true},
		{name: "a learner (a join under way) holds it",
			local:   model.Local{Running: true, Answer: follower, Restart: due},
			cluster: clusterWith(three, map[uint64]memberMod{3: func(m *model.Member) { m.IsLearner = true }}),
			want:    DoWait, reason: "rollout held: node3 is a learner", release: true},
		{name: "the others are no caught-up quorum: wait",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true},
			cluster: clusterWith(three, map[uint64]memberMod{3: lagging}),
			want:    DoWait, reason: "not restarting while the others have 1 of 2 voters caught up (quorum 2); node3 is catching up", release: true},
		{name: "a follower without the lock takes it",
			local:   model.Local{Running: true, Answer: follower, Restart: due},
			cluster: healthyCluster(three...),
			want:    DoTakeLock, reason: "taking the cluster lock to restart: " + up},
		{name: "the rollout's first member takes a verified snapshot first",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node1", up), rec("node3", up)},
			want:    DoRolloutSnapshot, reason: "verified snapshot before the rollout's first restart (" + up + ")"},
		{name: "another agent's snapshot of the same rollout stands for it: restart",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node1", up), {Name: "node3", Generation: "g2", RolloutSnapshot: key}},
			want:    DoRestart, reason: "restarting etcd of member 2: " + up + " (spec g2)",
			check: func(t *testing.T, a Action) {
				if a.Restart != due {
					t.Errorf("Restart = %+v, want %+v", a.Restart, due)
				}
			}},
		{name: "a snapshot of another rollout does not",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{{Name: "node3", Generation: "g1", RolloutSnapshot: "g1: changed settings"}},
			want:    DoRolloutSnapshot, reason: "verified snapshot"},
		{name: "the agent's own binary: the agent restarts, through the same rule",
			local: model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcdkeeper 0.4.0 → 0.5.0", Agent: true}, LockHeld: true}, mem: model.Memory{RolloutSnapshot: "g2: etcdkeeper 0.4.0 → 0.5.0"},
			cluster: healthyCluster(three...),
			want:    DoRestart, reason: "restarting the agent and its etcd of member 2: etcdkeeper 0.4.0 → 0.5.0",
			check: func(t *testing.T, a Action) {
				if !a.Restart.Agent {
					t.Error("the step does not say the agent restarts")
				}
			}},
		{name: "the leader waits while the others have restarts pending",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node3", up), rec("node1", up), rec("node2", up)},
			want:    DoWait, reason: "the leader restarts last: node2, node3 restart first", release: true},
		{name: "the leader waits without the agents' records",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due},
			cluster: healthyCluster(three...),
			want:    DoWait, reason: "the leader restarts last: cannot read the agents' records", release: true},
		{name: "the leader waits while an agent runs another spec",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node1", up), rec("node2", ""), {Name: "node3", Generation: "g1"}},
			want:    DoWait, reason: "node3 runs spec generation g1 (mine is g2)", release: true},
		{name: "the leader's turn: take the lock",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node1", up), rec("node2", ""), rec("node3", "")},
			want:    DoTakeLock, reason: "to restart: " + up},
		{name: "the leader moves its leadership to the caught-up voter furthest ahead first, keeping the lock",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: clusterWith(three, map[uint64]memberMod{3: func(m *model.Member) { m.RaftIndex = 90 }}),
			agents:  []model.AgentRecord{rec("node1", up), rec("node2", ""), rec("node3", "")},
			want:    DoChangeMembership, reason: "move leader from node1 to node3 (applied index 90): node1 is due for a restart (" + up + ")",
			check: func(t *testing.T, a Action) {
				if a.Step.Kind != StepMoveLeader || a.Step.MemberID != 1 || a.Step.To != 3 {
					t.Errorf("Step = %+v, want move-leader 1 → 3", a.Step)
				}
			}},
		{name: "the agent alone, the same embedded etcd: the leader restarts it in place, no hand-off, no wait for the others",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: model.Restart{Why: "etcdkeeper 0.4.0 → 0.5.0", Agent: true, AgentOnly: true}, LockHeld: true},
			mem:     model.Memory{RolloutSnapshot: "g2: etcdkeeper 0.4.0 → 0.5.0"},
			cluster: healthyCluster(three...),
			agents:  []model.AgentRecord{rec("node1", "etcdkeeper 0.4.0 → 0.5.0"), rec("node2", "etcdkeeper 0.4.0 → 0.5.0"), rec("node3", "")},
			want:    DoRestart, reason: "restarting the agent (its etcd keeps running) of member 1",
			check: func(t *testing.T, a Action) {
				if !a.Restart.AgentOnly {
					t.Error("the step does not say etcd keeps running")
				}
			}},
		{name: "the agent alone still waits for a caught-up quorum of the others",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcdkeeper 0.4.0 → 0.5.0", Agent: true, AgentOnly: true}, LockHeld: true},
			cluster: clusterWith(three, map[uint64]memberMod{3: lagging}),
			want:    DoWait, reason: "not restarting while the others have 1 of 2 voters caught up", release: true},
		{name: "restarted and behind: keep the lock until caught up",
			local: model.Local{Running: true, Answer: follower, LockHeld: true}, mem: model.Memory{Restarted: true},
			cluster: clusterWith(three, map[uint64]memberMod{2: lagging}),
			want:    DoWait, reason: "keeping the cluster lock until it has caught up: node2 is catching up"},
		{name: "restarted and caught up: the lock passes on",
			local: model.Local{Running: true, Answer: follower, LockHeld: true}, mem: model.Memory{Restarted: true},
			cluster: healthyCluster(three...),
			want:    DoNothing, reason: "node2 is a healthy voter", release: true},
		{name: "the spec changed back: no restart due, the hold is gone",
			local:   model.Local{Running: true, Answer: follower},
			cluster: clusterWith(three, map[uint64]memberMod{3: crashed}),
			agents:  []model.AgentRecord{rec("node1", ""), rec("node3", "")},
			want:    DoNothing, reason: "node2 is a healthy voter", release: true},
		{name: "two minors up: refused, every member keeps its etcd",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcd 3.5.26 → 3.7.3", EtcdFrom: "3.5.26", EtcdTo: "3.7.3"}, LockHeld: true},
			cluster: versioned(healthyCluster(three...), "3.5.0", "3.5.26", ""),
			want:    DoWait, reason: "rollout refused: etcd 3.7.3 is more than one minor ahead of the cluster version 3.5", release: true},
		{name: "3.5 below 3.5.26 to 3.6: refused",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcd 3.5.21 → 3.6.16", EtcdFrom: "3.5.21", EtcdTo: "3.6.16"}},
			cluster: versioned(healthyCluster(three...), "3.5.0", "3.5.21", ""),
			want:    DoWait, reason: "below 3.5.26: upgrade every member to 3.5.26 or later first", release: true},
		{name: "one minor up: the rollout goes on",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: versioned(healthyCluster(three...), "3.6.0", "3.6.16", ""),
			want:    DoRestart, reason: "restarting etcd of member 2: " + up},
		{name: "a just-formed cluster's placeholder version 3.0.0: judged by what its members run",
			local: model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: up, EtcdFrom: "3.6.16", EtcdTo: "3.7.3"}, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: versioned(healthyCluster(three...), "3.0.0", "3.6.16", ""),
			want:    DoRestart, reason: "restarting etcd of member 2: " + up},
		{name: "one minor down: etcd's downgrade is enabled first, under the lock",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcd 3.7.3 → 3.6.16", EtcdFrom: "3.7.3", EtcdTo: "3.6.16"}, LockHeld: true},
			cluster: versioned(healthyCluster(three...), "3.7.0", "3.7.3", ""),
			want:    DoDowngrade, reason: "enabling etcd's downgrade of the cluster version 3.7.0 to 3.6",
			check: func(t *testing.T, a Action) {
				if a.Downgrade != (Downgrade{Action: "enable", Target: "3.6"}) {
					t.Errorf("Downgrade = %+v", a.Downgrade)
				}
			}},
		{name: "downgrade enabled: the members roll back",
			local: model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcd 3.7.3 → 3.6.16", EtcdFrom: "3.7.3", EtcdTo: "3.6.16"}, LockHeld: true}, mem: model.Memory{RolloutSnapshot: "g2: etcd 3.7.3 → 3.6.16"},
			cluster: versioned(healthyCluster(three...), "3.6.0", "3.7.3", "3.6"),
			want:    DoRestart, reason: "etcd 3.7.3 → 3.6.16"},
		{name: "the spec went back to 3.7 during the downgrade: cancel it",
			local:   model.Local{Running: true, Answer: follower, WantEtcd: "3.7.3", LockHeld: true},
			cluster: versioned(healthyCluster(three...), "3.6.0", "3.7.3", "3.6"),
			want:    DoDowngrade, reason: "cancelling etcd's downgrade to 3.6: the spec's etcd is 3.7.3 again", release: true},
		{name: "a downgrade below 3.6: refused (etcd cannot)",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: "etcd 3.5.26 → 3.4.30", EtcdFrom: "3.5.26", EtcdTo: "3.4.30"}},
			cluster: versioned(healthyCluster(three...), "3.5.0", "3.5.26", ""),
			want:    DoWait, reason: "etcd supports downgrades only from 3.6 on", release: true},
		{name: "a one-member cluster takes the lock to restart (G2: the step refuses without it)",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due},
			cluster: healthyCluster("node1"),
			want:    DoTakeLock, reason: "taking the cluster lock to restart"},
		{name: "a one-member cluster restarts without the others, under the lock",
			self: "node1", local: model.Local{Running: true, Answer: leader, Restart: due, LockHeld: true},
			cluster: healthyCluster("node1"),
			want:    DoRestart, reason: "restarting etcd of member 1"},
		{name: "paused: the restart waits and says so",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true}, mem: model.Memory{RolloutSnapshot: key},
			cluster: healthyCluster(three...), paused: true,
			want: DoWait, reason: "would now: restart (restarting etcd of member 2", release: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			self := tt.self
			if self == "" {
				self = "node2"
			}
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			in := Input{Self: specMembers(self)[0], InSpec: true, Desired: specMembers(three...), Generation: "g2",
				Local: tt.local, Memory: tt.mem, Cluster: tt.cluster, Agents: tt.agents, Now: now}
			if tt.cluster != nil && len(tt.cluster.Members) == 1 {
				in.Desired = specMembers("node1")
			}
			if tt.paused {
				in.Pause = &model.Pause{By: "root@node1", Until: now.Add(time.Hour)}
			}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) || got.ReleaseLock != tt.release {
				t.Fatalf("Decide = %s %q (release lock %v), want %s containing %q (release lock %v)",
					got.Kind, got.Reason, got.ReleaseLock, tt.want, tt.reason, tt.release)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// versioned sets the cluster version, every member's etcd version and
// the downgrade target.
func versioned(c *model.Cluster, cluster, member, downgrade string) *model.Cluster {
	c.Version, c.DowngradeTarget = cluster, downgrade
	for i := range c.Members {
		c.Members[i].Version = member
	}
	return c
}
