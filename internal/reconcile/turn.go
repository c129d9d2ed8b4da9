package reconcile

import (
	"fmt"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Host turns: a host's turn to be disrupted from outside etcdkeeper (a
// reboot, OS patching, hand work), asked through the local agent by
// etcdkeeper guard or maintenance start (model.TurnWish). The agent takes
// it as a voluntary disruption of its member: granted by the one budget
// (DisruptHost), under the cluster lock (so that no lock holder's restart
// overlaps it), written to one key in the cluster (so that two hosts
// never hold turns together). While the turn's work runs the member
// counts as out of service for every other agent's budget (model.View);
// the turn ends once the work is over (the command has run, the host
// rebooted, maintenance end) and the member is a caught-up voter again.

// wantTurn is the decision of an agent whose host waits for a turn: it
// is tried where the operator's requests are (the membership as the spec
// wants it, no NOSPACE), and granted by the budget.
func wantTurn(in Input, self string) (Action, bool) {
	w := in.Local.Turn.Wish
	if w == nil || turnHeld(in) || in.Cluster == nil || in.Local.Answer == nil {
		return Action{}, false
	}
	waits := func(why, key string) (Action, bool) {
		return Action{Kind: DoNothing, Topic: TopicTurn, ReleaseLock: true, Key: "turn-wait/" + key,
			Reason: fmt.Sprintf("%s; host turn (%s) waits: %s", self, w.Why, why)}, true
	}
	if t := in.Cluster.Turn; t != nil {
		return waits(t.Text()+" comes first", "held/"+t.ID)
	}
	id := in.Local.Answer.MemberID
	if id == in.View().Leader && in.Now.Sub(w.At) < LeaderTurnGrace {
		// Hosts asked together (one reboot time, one Ansible run) reach
		// their agents a pass apart: the others' wishes show in their
		// records only by then, and the leader's host goes last.
		return waits(fmt.Sprintf("this member leads: its host waits %s for the other hosts' wishes (the leader's host goes last)", LeaderTurnGrace), "leader-grace")
	}
	g := budgetOf(in).grant(Request{Member: id, Kind: DisruptHost, Why: w.Why, Name: in.Self.Name}, turnQueue(in), false)
	if !g.Granted() {
		return waits(g.Wait, "budget/"+numberless(g.Wait))
	}
	if g.HandOff != nil {
		step := *g.HandOff
		key := fmt.Sprintf("turn/move-leader/%x", step.To)
		if !in.Local.LockHeld {
			return Action{Kind: DoTakeLock, Topic: TopicTurn, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step}, true
		}
		return Action{Kind: DoChangeMembership, Topic: TopicTurn, Key: key, Step: step, ReleaseLock: true,
			Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}, true
	}
	why := fmt.Sprintf("take the host turn for %s", w.Why)
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Topic: TopicTurn, Reason: "taking the cluster lock to " + why, Key: "lock/turn/" + w.ID}, true
	}
	_, others := in.View().ReadyToStop(id)
	return Action{Kind: DoTakeTurn, Topic: TopicTurn, Key: "turn/take/" + w.ID, ReleaseLock: true,
		Reason: fmt.Sprintf("took the host turn for %s (the others: %s)", w.Why, others)}, true
}

// LeaderTurnGrace is how long a leader's host waits before it takes a
// turn it wished: long enough for the wishes of hosts asked at the same
// moment to show in their agents' records (an agent publishes its record
// each pass, at most a steady interval of 5 s apart).
const LeaderTurnGrace = 12 * time.Second

// turnQueue is the other hosts waiting for a turn, as their agents'
// records say: the leader's host goes last.
func turnQueue(in Input) Queue {
	if in.Agents == nil {
		return Queue{Unknown: "the other agents' records are not read: the leader's host waits"}
	}
	var q Queue
	for _, r := range in.Agents {
		if r.WantsTurn != "" && r.Name != in.Self.Name && r.MemberID != 0 {
			q.Requests = append(q.Requests, Request{Member: r.MemberID, Name: r.Name, Kind: DisruptHost, Why: r.WantsTurn})
		}
	}
	return q
}

// ownTurn is the decision of an agent whose host holds the turn, before
// anything else would start, stop or restart its member: a turn taken
// away (released by another host) ends the wish; while the turn's work
// runs, etcd is stopped if the wish asked for it and stays so, and
// nothing else is done to the member; once the work is over the turn ends
// when the member is a caught-up voter again. A stopped etcd of a turn
// that returns is started by the start path as usual (false).
func ownTurn(in Input) (Action, bool) {
	tl := in.Local.Turn
	w := tl.Wish
	if !turnHeld(in) {
		return Action{}, false
	}
	if in.Cluster != nil && (in.Cluster.Turn == nil || in.Cluster.Turn.ID != w.ID) {
		return Action{Kind: DoEndTurn, Topic: TopicTurn, Key: "turn/gone/" + w.ID, ReleaseLock: true,
			Reason: fmt.Sprintf("host turn for %s over: the cluster no longer holds it (released by another host after maintenance.hostTurnTimeout, or by hand)", w.Why)}, true
	}
	if tl.Active {
		if w.StopEtcd && in.Local.Running {
			return Action{Kind: DoStopForTurn, Topic: TopicTurn, Key: "turn/stop/" + w.ID,
				Reason: fmt.Sprintf("stopped etcd for the host turn (%s)", w.Why)}, true
		}
		if w.StopEtcd {
			return Action{Kind: DoWait, Topic: TopicTurn, Key: "turn/stopped/" + w.ID, ReleaseLock: true,
				Reason: fmt.Sprintf("waiting: etcd stays stopped while the host turn's work runs (%s)", w.Why)}, true
		}
		return Action{Kind: DoNothing, Topic: TopicTurn, Key: "turn/held/" + w.ID, ReleaseLock: true,
			Reason: fmt.Sprintf("host turn held: %s runs; nothing else is done to %s meanwhile", w.Why, in.Self.Name)}, true
	}
	if !in.Local.Running {
		return Action{}, false
	}
	back, why := caughtUpAgain(in)
	if back && !tl.Settled {
		back, why = false, "the work has just ended (a command that asked for a reboot returns before the shutdown)"
	}
	if !back {
		return Action{Kind: DoWait, Topic: TopicTurn, Key: "turn/returning/" + w.ID, ReleaseLock: true,
			Reason: fmt.Sprintf("waiting: the host turn (%s) ends once %s is a caught-up voter again: %s", w.Why, in.Self.Name, why)}, true
	}
	return Action{Kind: DoEndTurn, Topic: TopicTurn, Key: "turn/end/" + w.ID, ReleaseLock: true, Turn: in.Cluster.Turn,
		Reason: fmt.Sprintf("host turn for %s ended: %s is a caught-up voter again", w.Why, in.Self.Name)}, true
}

// turnHeld: this host holds the turn of its wish: granted here, or named
// by the cluster's key (a take whose answer was lost: its txn committed,
// the call timed out; the agent keeps the wish as granted when it sees
// the key, observeTurn).
func turnHeld(in Input) bool {
	w := in.Local.Turn.Wish
	if w == nil {
		return false
	}
	return w.Granted || (in.Cluster != nil && in.Cluster.Turn.Of(w, in.Self.Name))
}

// caughtUpAgain: the local member is a voter that serves and has caught
// up, as the pass's view shows it.
func caughtUpAgain(in Input) (bool, string) {
	a := in.Local.Answer
	switch {
	case a == nil:
		return false, "etcd does not answer yet"
	case a.Leader == 0:
		return false, "it has no leader"
	case a.IsLearner:
		return false, "it is a learner"
	case in.Cluster == nil:
		return false, "the cluster is not observed"
	}
	m, ok := in.View().Member(a.MemberID)
	switch {
	case !ok:
		return false, "the cluster does not list it"
	case !m.Healthy:
		return false, "it is not healthy"
	case !m.CaughtUp:
		return false, in.View().LagOf(a.MemberID)
	}
	return true, ""
}

// releaseTurn releases a turn whose holder's agent stopped renewing it
// (a host that never came back): this agent has seen its key unchanged
// for maintenance.hostTurnTimeout by its own clock (HostTurn.Unchanged;
// never the holder's Renewed, which another host's clock wrote). The
// budget still counts its member out of service while it is down.
func releaseTurn(in Input) (Action, bool) {
	t := in.Cluster.Turn
	if t == nil || t.Member == in.Self.Name || !t.Expired(in.TurnTimeout) {
		return Action{}, false
	}
	return Action{Kind: DoReleaseTurn, Topic: TopicTurn, Turn: t, Key: "turn/release/" + t.ID, ReleaseLock: true,
		Reason: fmt.Sprintf("released %s: its agent has not renewed it: unchanged for %s as this agent saw it (maintenance.hostTurnTimeout %s): is the host down? Its member is still counted out of service while it does not serve",
			t.Text(), Approx(t.Unchanged), Approx(in.TurnTimeout))}, true
}

// HandOff is the move of leadership off the leader, to a caught-up voter
// of the spec, before its etcd stops for why (the agent's shutdown, a
// stop for a host turn): StepNone when there is no leader to move, a
// wait when no voter can take over.
func HandOff(desired []spec.Member, obs model.Cluster, why string) Step {
	pv := newPlanView(desired, obs)
	if pv.leader == nil {
		return Step{Kind: StepNone, Reason: "no leader known"}
	}
	return pv.moveLeaderFor(*pv.leader, "a stop", why, func(c planMember) bool { return c.serving() && c.CaughtUp })
}
