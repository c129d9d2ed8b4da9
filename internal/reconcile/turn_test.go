package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestHostTurn: a host's turn (etcdkeeper guard, maintenance start) is a
// disruption the budget grants like a restart: under the lock, one out of
// service at a time, the leader's host last after a hand-off; one turn in
// the cluster; its member counts as out of service for the others; it
// ends only once the member is a caught-up voter again.
func TestHostTurn(t *testing.T) {
	guard := &model.TurnWish{ID: "w1", Kind: model.TurnGuard, Why: "guard: systemctl reboot", By: "root@node2"}
	granted := func(stop bool) *model.TurnWish {
		w := *guard
		w.Granted, w.StopEtcd = true, stop
		return &w
	}
	fresh := &model.TurnWish{ID: "w1", Kind: model.TurnGuard, Why: "guard: systemctl reboot", At: planNow.Add(-2 * time.Second)}
	mine := &model.HostTurn{ID: "w1", Member: "node2", MemberID: 2, Why: "guard: systemctl reboot", Since: planNow.Add(-time.Minute), Renewed: planNow.Add(-10 * time.Second)}
	other := &model.HostTurn{ID: "t3", Member: "node3", MemberID: 3, Why: "guard: apt-get -y dist-upgrade", Since: planNow.Add(-time.Minute), Renewed: planNow.Add(-10 * time.Second)}
	stale := &model.HostTurn{ID: "t3", Member: "node3", MemberID: 3, Why: "guard: systemctl reboot", Since: planNow.Add(-time.Hour), Renewed: planNow.Add(-20 * time.Minute), Unchanged: 20 * time.Minute}
	// The holder's clock is no measure here: another host's wall clock
	// wrote Renewed. What counts is how long this agent has seen the key
	// unchanged, by its own clock.
	behind := &model.HostTurn{ID: "t3", Member: "node3", MemberID: 3, Why: "guard: systemctl reboot", Since: planNow.Add(-time.Hour), Renewed: planNow.Add(-20 * time.Minute), Unchanged: 10 * time.Second}
	ahead := &model.HostTurn{ID: "t3", Member: "node3", MemberID: 3, Why: "guard: systemctl reboot", Since: planNow, Renewed: planNow.Add(time.Hour), Unchanged: 16 * time.Minute}
	withTurn := func(c model.Cluster, turn *model.HostTurn) model.Cluster {
		c.Turn = turn
		return c
	}
	healthy := observed(1, nodes(3, nil)...)
	tests := []struct {
		name      string
		size      int // members (0: 3)
		max       int // maintenance.maxDisrupted (0: 1)
		self      int // 1-based: node1 leads
		obs       model.Cluster
		local     model.TurnLocal
		lock      bool
		running   bool
		restart   bool
		pause     bool
		agents    []model.AgentRecord
		kind      ActionKind
		contains  string
		turnGiven bool // Action.Turn names the cluster's turn
	}{
		{name: "wish, follower: the lock first", self: 2, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, running: true,
			kind: DoTakeLock, contains: "take the host turn for guard: systemctl reboot"},
		{name: "wish, follower, under the lock: taken", self: 2, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true,
			kind: DoTakeTurn, contains: "took the host turn"},
		{name: "wish, leader, no other host waiting: hand-off first", self: 1, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true,
			agents: []model.AgentRecord{{Name: "node2", MemberID: 2}, {Name: "node3", MemberID: 3}}, kind: DoChangeMembership, contains: "move-leader"},
		{name: "wish, leader, a follower's host waits: the leader last", self: 1, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true,
			agents: []model.AgentRecord{{Name: "node3", MemberID: 3, WantsTurn: "guard: systemctl reboot"}}, kind: DoNothing, contains: "node3 take their host turns first"},
		{name: "wish, leader, just asked: waits for the others' wishes", self: 1, obs: healthy, local: model.TurnLocal{Wish: fresh, Active: true}, lock: true, running: true,
			agents: []model.AgentRecord{{Name: "node2", MemberID: 2}, {Name: "node3", MemberID: 3}}, kind: DoNothing, contains: "its host waits 12s for the other hosts' wishes"},
		{name: "wish, follower, just asked: no grace", self: 2, obs: healthy, local: model.TurnLocal{Wish: fresh, Active: true}, lock: true, running: true,
			kind: DoTakeTurn, contains: "took the host turn"},
		{name: "wish, leader, records not read: waits", self: 1, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true,
			kind: DoNothing, contains: "records are not read"},
		{name: "wish, another host holds the turn", self: 2, obs: withTurn(healthy, other), local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true,
			kind: DoNothing, contains: "node3's host turn (guard: apt-get -y dist-upgrade"},
		{name: "wish, another member down: waits", self: 2, obs: observed(1, nodes(3, map[int][]memberMod{3: {down}})...), local: model.TurnLocal{Wish: guard, Active: true},
			lock: true, running: true, kind: DoNothing, contains: "node3 is not a healthy voter"},
		{name: "wish, 5 members, budget 2, another member down: waits all the same", size: 5, max: 2, self: 2, obs: observed(1, nodes(5, map[int][]memberMod{5: {down}})...),
			local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true, kind: DoNothing, contains: "node5 is not a healthy voter"},
		{name: "wish, paused: held", self: 2, obs: healthy, local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true, pause: true,
			kind: DoWait, contains: "would now: take-turn"},
		{name: "another host's stale turn: released, loudly", self: 2, obs: withTurn(healthy, stale), running: true,
			kind: DoReleaseTurn, contains: "unchanged for 20m", turnGiven: true},
		{name: "another host's turn, its clock 20m behind, renewed a moment ago as this agent saw it: not released", self: 2, obs: withTurn(healthy, behind), running: true,
			kind: DoNothing, contains: "healthy voter"},
		{name: "another host's turn, its clock an hour ahead, unchanged for 16m as this agent saw it: released", self: 2, obs: withTurn(healthy, ahead), running: true,
			kind: DoReleaseTurn, contains: "unchanged for 16m", turnGiven: true},
		{name: "another host's live turn: not released", self: 2, obs: withTurn(healthy, other), running: true,
			kind: DoNothing, contains: "healthy voter"},
		{name: "another host's turn holds this member's restart", self: 2, obs: withTurn(healthy, other), running: true, restart: true,
			kind: DoWait, contains: "node3 is in node3's host turn"},
		{name: "5 members, budget 2: another host's turn holds this member's restart all the same", size: 5, max: 2, self: 2, obs: withTurn(observed(1, nodes(5, nil)...), other),
			running: true, restart: true, kind: DoWait, contains: "node3 is in node3's host turn"},
		{name: "held, etcd to stop: stopped", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(true), Active: true}, running: true,
			kind: DoStopForTurn, contains: "stopped etcd for the host turn"},
		{name: "held, etcd stopped: stays stopped", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(true), Active: true},
			kind: DoWait, contains: "etcd stays stopped"},
		{name: "held, not stopped: nothing else, not even a restart due", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(false), Active: true},
			running: true, restart: true, kind: DoNothing, contains: "host turn held"},
		{name: "returning, caught up, settled: ends", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(false), Settled: true}, running: true,
			kind: DoEndTurn, contains: "caught-up voter again", turnGiven: true},
		{name: "returning, not settled: waits", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(false)}, running: true,
			kind: DoWait, contains: "has just ended"},
		{name: "returning, lagging: waits", self: 2, obs: withTurn(observed(1, nodes(3, map[int][]memberMod{2: {lagging}})...), mine),
			local: model.TurnLocal{Wish: granted(false), Settled: true}, running: true, kind: DoWait, contains: "ends once node2 is a caught-up voter"},
		{name: "returning, paused: still ends", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(false), Settled: true}, running: true, pause: true,
			kind: DoEndTurn, contains: "caught-up voter again", turnGiven: true},
		{name: "returning, stopped: the start path starts etcd", self: 2, obs: withTurn(healthy, mine), local: model.TurnLocal{Wish: granted(true), Settled: true},
			kind: DoStart, contains: "started etcd"},
		{name: "not granted here, but the cluster holds this wish's turn (the take's answer was lost): held", self: 2, obs: withTurn(healthy, mine),
			local: model.TurnLocal{Wish: guard, Active: true}, lock: true, running: true, kind: DoNothing, contains: "host turn held"},
		{name: "not granted here, the cluster holds this wish's turn, the work over: ends", self: 2, obs: withTurn(healthy, mine),
			local: model.TurnLocal{Wish: guard, Settled: true}, running: true, kind: DoEndTurn, contains: "caught-up voter again", turnGiven: true},
		{name: "granted, the cluster no longer holds it: the wish ends", self: 2, obs: healthy, local: model.TurnLocal{Wish: granted(false), Active: true}, running: true,
			kind: DoEndTurn, contains: "no longer holds it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			size := max(tt.size, 3)
			self := specNodes(size)[tt.self-1]
			id := uint64(tt.self)
			in := Input{Self: self, InSpec: true, Desired: specNodes(size), Cluster: &obs, Now: planNow, Agents: tt.agents, TurnTimeout: 15 * time.Minute, MaxDisrupted: tt.max,
				Memory: model.Memory{Compacted: 50},
				Local:  model.Local{Running: tt.running, LockHeld: tt.lock, Turn: tt.local, Data: model.Data{Kind: model.DataHealthy, ClusterID: obs.ClusterID, MemberID: id}}}
			if tt.running {
				in.Local.Answer = &model.Answer{MemberID: id, ClusterID: obs.ClusterID, Leader: obs.LeaderID, Revision: 50}
			} else {
				in.Local.Marker = &model.Marker{ClusterID: obs.ClusterID, MemberID: id}
			}
			if tt.restart {
				in.Local.Restart = model.Restart{Why: "settings changed"}
				in.Agents = append(in.Agents, model.AgentRecord{Name: "node2", MemberID: 2, RestartPending: "settings changed"})
			}
			if tt.pause {
				in.Pause = &model.Pause{By: "root@ops", Reason: "disk work"}
			}
			got := Decide(in)
			if got.Kind != tt.kind || !strings.Contains(got.Reason, tt.contains) {
				t.Fatalf("got %s (%s), want %s containing %q", got.Kind, got.Reason, tt.kind, tt.contains)
			}
			if tt.turnGiven != (got.Turn != nil) {
				t.Errorf("Action.Turn = %+v, want one: %v", got.Turn, tt.turnGiven)
			}
			if got.Kind == DoTakeTurn && !got.NeedsLock() {
				t.Errorf("taking a turn must need the cluster lock")
			}
		})
	}
}
