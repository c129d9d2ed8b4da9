package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestMaxDisrupted: maintenance.maxDisrupted lets a second member out of
// service in a cluster of 5 (one is down, another restarts), never in a
// smaller one, and never below raft's quorum of caught-up voters. A host
// turn is the one member out of service whatever it says: it is taken
// only while no other member is out, and while it is held nothing else
// is disrupted.
func TestMaxDisrupted(t *testing.T) {
	due := model.Restart{Why: "changed settings"}
	tests := []struct {
		name     string
		size     int
		down     []int
		max      int
		turn     int  // the member whose host holds the turn (0: none)
		wish     bool // node2's host wishes a turn (no restart due)
		want     ActionKind
		contains string
	}{
		{"5 members, one down, budget 1: held", 5, []int{5}, 1, 0, false, DoWait, "rollout held: node5 is not a healthy voter"},
		{"5 members, one down, budget 2: restarts", 5, []int{5}, 2, 0, false, DoRestart, "restarting etcd of member 2"},
		{"5 members, two down, budget 2: held", 5, []int{4, 5}, 2, 0, false, DoWait, "rollout held"},
		{"3 members, one down, budget 2: 1 all the same", 3, []int{3}, 2, 0, false, DoWait, "rollout held"},
		{"7 members, two down, budget 3: the quorum of 4 caught up others is kept", 7, []int{6, 7}, 3, 0, false, DoRestart, "restarting"},
		{"5 members, budget 2, node5 in its host turn: the restart is held", 5, nil, 2, 5, false, DoWait, "node5 is in node5's host turn"},
		{"5 members, budget 2, node5 in its host turn and down: the restart is held", 5, []int{5}, 2, 5, false, DoWait, "node5 is in node5's host turn"},
		{"7 members, budget 3, node7 in its host turn: the restart is held", 7, nil, 3, 7, false, DoWait, "node7 is in node7's host turn"},
		{"5 members, budget 2, healthy: the host turn is taken", 5, nil, 2, 0, true, DoTakeTurn, "took the host turn"},
		{"5 members, one down, budget 2: the host turn waits", 5, []int{5}, 2, 0, true, DoNothing, "host turn (guard: systemctl reboot) waits: node5 is not a healthy voter"},
		{"7 members, one down, budget 3: the host turn waits", 7, []int{7}, 3, 0, true, DoNothing, "waits: node7 is not a healthy voter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for i := 1; i <= tt.size; i++ {
				names = append(names, "node"+string(rune('0'+i)))
			}
			c := healthyCluster(names...)
			for _, d := range tt.down {
				c.Members[d-1].Healthy, c.Members[d-1].CaughtUp, c.Members[d-1].Err = false, false, "connection refused"
			}
			if tt.turn != 0 {
				c.Turn = &model.HostTurn{ID: "t", Member: names[tt.turn-1], MemberID: uint64(tt.turn), Why: "guard: systemctl reboot", Since: planNow, Renewed: planNow}
			}
			in := Input{Self: specMembers(names...)[1], InSpec: true, Desired: specMembers(names...), Generation: "g1", Cluster: c, MaxDisrupted: tt.max, Now: planNow,
				Local:  model.Local{Running: true, LockHeld: true, Restart: due, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}},
				Memory: model.Memory{RolloutSnapshot: RolloutKey("g1", due)}}
			if tt.wish {
				in.Local.Restart = model.Restart{}
				in.Local.Turn = model.TurnLocal{Wish: &model.TurnWish{ID: "w", Kind: model.TurnGuard, Why: "guard: systemctl reboot"}, Active: true}
			}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.contains) {
				t.Errorf("got %s (%s), want %s containing %q", got.Kind, got.Reason, tt.want, tt.contains)
			}
		})
	}
}

// TestHostTurnAloneInTheBudget: the budget's rule 3 for host turns, by
// the kind of request: with maintenance.maxDisrupted 2 of 5 a restart or
// a defragmentation may join one member out of service, a host turn may
// not; and while a host turn is held nothing is granted beside it but a
// repair stop (its member has failed already), not even a
// defragmentation of the turn's own member.
func TestHostTurnAloneInTheBudget(t *testing.T) {
	names := []string{"node1", "node2", "node3", "node4", "node5"}
	tests := []struct {
		name    string
		req     Request
		down    int // a member not serving (0: none)
		turn    int // the member whose host holds the turn (0: none)
		granted bool
		wait    string
	}{
		{name: "restart of node2, node5 down", req: Request{Member: 2, Kind: DisruptRestart}, down: 5, granted: true},
		{name: "defrag of node2, node5 down", req: Request{Member: 2, Kind: DisruptDefrag}, down: 5, granted: true},
		{name: "host turn of node2, node5 down", req: Request{Member: 2, Kind: DisruptHost}, down: 5, wait: "node5 is not a healthy voter"},
		{name: "host turn of node2, none down", req: Request{Member: 2, Kind: DisruptHost}, granted: true},
		{name: "restart of node2, node5 in its turn", req: Request{Member: 2, Kind: DisruptRestart}, turn: 5, wait: "node5 is in node5's host turn"},
		{name: "defrag of node2, node5 in its turn", req: Request{Member: 2, Kind: DisruptDefrag}, turn: 5, wait: "node5 is in node5's host turn"},
		{name: "defrag of node5, node5 in its turn", req: Request{Member: 5, Kind: DisruptDefrag}, turn: 5, wait: "node5 is in node5's host turn"},
		{name: "repair stop of node2, node5 in its turn", req: Request{Member: 2, Kind: DisruptRepairStop}, turn: 5, granted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := healthyCluster(names...)
			if tt.down != 0 {
				c.Members[tt.down-1].Healthy, c.Members[tt.down-1].CaughtUp = false, false
			}
			if tt.turn != 0 {
				c.Turn = &model.HostTurn{ID: "t", Member: names[tt.turn-1], MemberID: uint64(tt.turn), Why: "guard: systemctl reboot", Since: planNow, Renewed: planNow}
			}
			in := Input{Self: specMembers(names...)[1], InSpec: true, Desired: specMembers(names...), Cluster: c, MaxDisrupted: 2, Now: planNow}
			g := budgetOf(in).grant(tt.req, Queue{}, false)
			if g.Granted() != tt.granted || !strings.Contains(g.Wait, tt.wait) {
				t.Errorf("grant(%s of %d) = %+v, want granted %v, waiting on %q", tt.req.Kind, tt.req.Member, g, tt.granted, tt.wait)
			}
		})
	}
}
