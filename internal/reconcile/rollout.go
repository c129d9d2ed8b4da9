package reconcile

import (
	"fmt"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// RolloutKey names one rollout across the agents: the spec generation
// and what the restart is for. The agents of one rollout share it, so
// the snapshot it begins with is taken once.
func RolloutKey(generation string, r model.Restart) string {
	return generation + ": " + r.Why
}

// rollingRestart is the one rule for a member that must restart, whatever
// for (model.Restart: changed settings, another etcd binary, another agent
// binary). What is due is the spec's; whether and when is the disruption
// budget's (grant: one member at a time, a caught-up quorum left, the
// leader last after a hand-off). The rules, in order (the order is the
// point):
//  1. Only on a view of the cluster; and, for a new agent binary, only
//     onto an embedded etcd that etcd allows in this cluster
//     (upgradeRefused: one minor at a time, no downgrade).
//  2. The budget grants it (grant): the first member of a rollout that
//     does not come back holds the others (they keep what they run) until
//     it is healthy again or the spec no longer asks for the restart; the
//     caught-up others must keep raft's quorum; the leader waits while
//     another agent has a restart pending (othersFirst; or runs another
//     spec generation: the spec file reaches the hosts at different
//     times). (The member before this one kept the lock until it had
//     caught up: restartedCatchingUp.)
//  3. A new etcd version only as etcd allows (spec.Preflight against the
//     cluster version): refused, every member keeps its etcd and the
//     wait says why; one minor down, etcd's downgrade is enabled first
//     (and cancelled when the spec goes back: downgradeCancel).
//  4. Under the cluster lock: one member at a time, cluster-wide; the lock
//     stays with the member until it is a healthy voter again (a
//     one-member cluster too: the step refuses without it).
//  5. A verified snapshot before the first member moves (once per rollout,
//     RolloutKey: an agent record that shows one stands for it); not in a
//     one-member cluster, whose restart moves nothing across members.
//  6. The leader moves its leadership to a caught-up healthy voter first
//     (the budget's hand-off), and restarts as a follower in a later pass.
//  7. Restart.
func rollingRestart(in Input) Action {
	r := in.Local.Restart
	id := in.Local.Answer.MemberID
	why := "restart due (" + r.Why + ")"
	c := in.Cluster
	if c == nil {
		return giveBack(wait("restart-no-view", "%s; cannot observe the cluster to restart safely", why))
	}
	if refused := upgradeRefused(in); refused != "" {
		return giveBack(wait("restart-refused/"+stableKey(refused), "%s", refused))
	}
	g, held := rolloutGrant(in, id, r.Why)
	if !g.Granted() {
		return held
	}
	if act, ok := etcdPreflight(in, why); ok {
		return act
	}
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: fmt.Sprintf("taking the cluster lock to restart: %s", r.Why), Key: "lock/restart", Topic: TopicRollout}
	}
	if len(c.Members) > 1 && !snapshotTaken(in) {
		return Action{Kind: DoRolloutSnapshot, Key: "rollout-snapshot", Topic: TopicRollout,
			Reason: fmt.Sprintf("taking a verified snapshot before the rollout's first restart (%s)", r.Why)}
	}
	if g.HandOff != nil {
		step := *g.HandOff
		return Action{Kind: DoChangeMembership, Key: fmt.Sprintf("restart/move-leader/%x", step.To), Step: step, Topic: TopicRollout,
			Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}
	}
	return restartStep(in, id)
}

// rolloutGrant asks the budget for this member's restart; held is the
// wait to return when it is not granted.
func rolloutGrant(in Input, id uint64, what string) (Grant, Action) {
	why := "restart due (" + what + ")"
	kind := DisruptRestart
	if in.Local.Restart.AgentOnly {
		kind = DisruptAgent
	}
	g := budgetOf(in).grant(Request{Member: id, Kind: kind, Why: what}, rolloutQueue(in), false)
	v := in.View()
	switch {
	case g.Granted():
		return g, Action{}
	case len(v.DisruptedExcept(id)) > 0:
		return g, giveBack(Action{Kind: DoWait, Key: "rollout-held/" + numberless(g.Wait), Topic: TopicRollout, Rollout: &model.RolloutNote{Held: true, HeldOn: g.Wait},
			Reason: fmt.Sprintf("waiting: rollout held: %s; %s", g.Wait, why)})
	case g.LeaderLast:
		return g, giveBack(Action{Kind: DoWait, Key: "wait/restart-leader-last", Topic: TopicRollout,
			Reason: fmt.Sprintf("waiting: %s; the leader restarts last: %s", why, g.Wait)})
	}
	return g, giveBack(Action{Kind: DoWait, Key: "wait/restart/" + numberless(g.Wait), Topic: TopicRollout,
		Reason: fmt.Sprintf("waiting: %s; not restarting while %s", why, g.Wait)})
}

// rolloutQueue is the rollout's other pending restarts, from the agents'
// records: an agent with a restart pending, or one that runs another spec
// generation (the spec file reaches the hosts at different times: it may
// be about to ask for one).
func rolloutQueue(in Input) Queue {
	if in.Agents == nil {
		return Queue{Unknown: "cannot read the agents' records"}
	}
	var q Queue
	var skew []string
	for _, r := range in.Agents {
		if r.Name == in.Self.Name {
			continue
		}
		if r.RestartPending != "" {
			q.Requests = append(q.Requests, Request{Member: r.MemberID, Kind: DisruptRestart, Name: r.Name})
		}
		if r.Generation != in.Generation {
			skew = append(skew, fmt.Sprintf("%s runs spec generation %s", r.Name, r.Generation))
		}
	}
	if len(q.Requests) == 0 && len(skew) > 0 {
		q.Unknown = strings.Join(skew, "; ") + " (mine is " + in.Generation + ")"
	}
	return q
}

func restartStep(in Input, id uint64) Action {
	what := "etcd"
	switch r := in.Local.Restart; {
	case r.AgentOnly:
		what = "the agent (its etcd keeps running)"
	case r.Agent:
		what = "the agent and its etcd"
	}
	return Action{Kind: DoRestart, Key: "restart", Restart: in.Local.Restart, Topic: TopicRollout,
		Reason: fmt.Sprintf("restarting %s of member %x: %s (spec %s)", what, id, in.Local.Restart.Why, in.Generation)}
}

// restartedCatchingUp keeps the cluster lock with a member restarted for a
// rollout until it has caught up with the leader (model.CaughtUp): the
// next member goes only once this one can carry writes again. The lock's
// longest hold (agent.learnerTimeout) bounds it.
func restartedCatchingUp(in Input) (Action, bool) {
	l := in.Local
	if !in.Memory.Restarted || !l.LockHeld || in.Cluster == nil {
		return Action{}, false
	}
	m, ok := in.Cluster.Member(l.Answer.MemberID)
	if !ok || m.CaughtUp {
		return Action{}, false
	}
	return wait("restarted-catching-up", "restarted for a rollout; keeping the cluster lock until it has caught up: %s", in.View().LagOf(m.ID)), true
}

// snapshotTaken: this agent, or another agent of the same rollout, took
// the verified snapshot the rollout begins with.
func snapshotTaken(in Input) bool {
	key := RolloutKey(in.Generation, in.Local.Restart)
	if in.Memory.RolloutSnapshot == key {
		return true
	}
	for _, r := range in.Agents {
		if r.RolloutSnapshot == key {
			return true
		}
	}
	return false
}

func recordOf(recs []model.AgentRecord, name string) (model.AgentRecord, bool) {
	for _, r := range recs {
		if r.Name == name {
			return r, true
		}
	}
	return model.AgentRecord{}, false
}

// Downgrade is one call of etcd's downgrade API: Action "enable" (after
// "validate") to Target ("3.6"), or "cancel".
type Downgrade struct {
	Action, Target string
}

// etcdPreflight judges a restart onto another etcd version against the
// cluster version (spec.Preflight): refused, it waits and says why; one
// minor down, it enables etcd's downgrade first, under the lock.
func etcdPreflight(in Input, why string) (Action, bool) {
	r, c := in.Local.Restart, in.Cluster
	to, err := spec.ParseVersion(r.EtcdTo)
	if r.EtcdTo == "" || err != nil {
		return Action{}, false
	}
	// preflightOnto, as for a new agent binary: a cluster just formed
	// reports etcd's placeholder version 3.0.0 until its leader decides.
	move, refused := preflightOnto(*c, r.EtcdTo)
	switch {
	case move == spec.MoveRefused:
		return giveBack(Action{Kind: DoWait, Key: "wait/rollout-refused/" + r.EtcdTo,
			Reason: fmt.Sprintf("waiting: rollout refused: %s; every member keeps its etcd (this one %s): fix etcd.binary", refused, r.EtcdFrom)}), true
	case move == spec.MoveDowngrade && c.DowngradeTarget != to.MinorString():
		if !in.Local.LockHeld {
			return Action{Kind: DoTakeLock, Key: "lock/downgrade", Reason: fmt.Sprintf("taking the cluster lock to enable etcd's downgrade to %s: %s", to.MinorString(), why)}, true
		}
		return Action{Kind: DoDowngrade, Key: "downgrade/enable/" + to.MinorString(), Downgrade: Downgrade{Action: "enable", Target: to.MinorString()},
			Reason: fmt.Sprintf("enabling etcd's downgrade of the cluster version %s to %s (etcd %s → %s)", c.Version, to.MinorString(), r.EtcdFrom, r.EtcdTo)}, true
	}
	return Action{}, false
}

// downgradeCancel cancels etcd's downgrade when the spec no longer asks
// for its target: the spec went back (its etcd is another minor).
func downgradeCancel(in Input) (Action, bool) {
	c := in.Cluster
	if c == nil || c.DowngradeTarget == "" || in.Local.WantEtcd == "" {
		return Action{}, false
	}
	want, err := spec.ParseVersion(in.Local.WantEtcd)
	target, terr := spec.ParseVersion(c.DowngradeTarget)
	if err != nil || terr != nil || want.MinorString() == target.MinorString() {
		return Action{}, false
	}
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Key: "lock/downgrade-cancel", Reason: fmt.Sprintf("taking the cluster lock to cancel etcd's downgrade to %s: the spec's etcd is %s", target.MinorString(), want)}, true
	}
	return Action{Kind: DoDowngrade, Key: "downgrade/cancel/" + target.MinorString(), Downgrade: Downgrade{Action: "cancel"}, ReleaseLock: true,
		Reason: fmt.Sprintf("cancelling etcd's downgrade to %s: the spec's etcd is %s again", target.MinorString(), want)}, true
}
