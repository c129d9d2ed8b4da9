package reconcile

import (
	"fmt"
	"slices"
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
// binary). The rules, in order (the order is the point):
//  1. Only on a view of the cluster; and, for a new agent binary, only
//     onto an embedded etcd that etcd allows in this cluster
//     (upgradeRefused: one minor at a time, no downgrade).
//  2. Hold while another member is not a healthy started voter: the first
//     member of a rollout that does not come back stops it (the others keep
//     what they run); the hold names it and what its agent says. It ends
//     when that member is healthy again, or when the spec no longer asks
//     this member to restart (the spec changed back).
//  3. The caught-up voters without this one a quorum (model.CaughtUp):
//     writes must commit while it is down. (The member before this one
//     kept the lock until it had caught up: restartedCatchingUp.)
//  4. A new etcd version only as etcd allows (spec.Preflight against the
//     cluster version): refused, every member keeps its etcd and the
//     wait says why; one minor down, etcd's downgrade is enabled first
//     (and cancelled when the spec goes back: downgradeCancel).
//  5. The leader last: it waits while another agent has a restart pending
//     or runs another spec generation (the spec file reaches the hosts at
//     different times).
//  6. Under the cluster lock: one member at a time, cluster-wide; the lock
//     stays with the member until it is a healthy voter again.
//  7. A verified snapshot before the first member moves (once per rollout,
//     RolloutKey: an agent record that shows one stands for it).
//  8. The leader moves its leadership to a caught-up healthy voter first,
//     and restarts as a follower in a later pass.
//  9. Restart.
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
	if len(c.Members) == 1 {
		return restartStep(in, id, why)
	}
	if held := rolloutHold(in, id); held != "" {
		return giveBack(Action{Kind: DoWait, Key: "rollout-held/" + numberless(held),
			Reason: fmt.Sprintf("waiting: rollout held: %s; %s", held, why)})
	}
	if ok, detail := c.QuorumWithoutCaughtUp(id); !ok {
		return giveBack(wait("restart-no-quorum", "%s; not restarting while the others have %s", why, detail))
	}
	if act, ok := etcdPreflight(in, why); ok {
		return act
	}
	leads := c.LeaderID == id
	if leads {
		if first := othersFirst(in); first != "" {
			return giveBack(wait("restart-leader-last", "%s; the leader restarts last: %s", why, first))
		}
	}
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: fmt.Sprintf("taking the cluster lock to restart: %s", r.Why), Key: "lock/restart"}
	}
	if !snapshotTaken(in) {
		return Action{Kind: DoRolloutSnapshot, Key: "rollout-snapshot",
			Reason: fmt.Sprintf("taking a verified snapshot before the rollout's first restart (%s)", r.Why)}
	}
	if leads {
		step, listed := restartHandOff(in, r.Why)
		if !listed {
			return giveBack(wait("restart-leader-unlisted", "%s; this leader is not among the cluster's members", why))
		}
		if step.Kind == StepWait {
			return giveBack(Action{Kind: DoWait, Key: "wait/restart-no-successor", Reason: step.Reason})
		}
		return Action{Kind: DoChangeMembership, Key: fmt.Sprintf("restart/move-leader/%x", step.To), Step: step,
			Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}
	}
	return restartStep(in, id, why)
}

// restartHandOff is the leader move that comes before the local member's
// restart while it leads: to the caught-up serving voter with the highest
// applied index (moveLeaderFor), or a wait when there is none. listed
// false: the local member is not among the cluster's members.
func restartHandOff(in Input, why string) (step Step, listed bool) {
	id := in.Local.Answer.MemberID
	v := newPlanView(in.Desired, *in.Cluster)
	i := slices.IndexFunc(v.members, func(m planMember) bool { return m.ID == id })
	if i < 0 {
		return Step{}, false
	}
	return v.moveLeaderFor(v.members[i], "a restart", why, func(m planMember) bool { return m.serving() && m.CaughtUp }), true
}

func restartStep(in Input, id uint64, why string) Action {
	// Under the lock in a one-member cluster too: the step refuses
	// without it, and a learner joining meanwhile would make it two.
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to restart: " + in.Local.Restart.Why, Key: "lock/restart"}
	}
	what := "etcd"
	if in.Local.Restart.Agent {
		what = "the agent and its etcd"
	}
	return Action{Kind: DoRestart, Key: "restart", Restart: in.Local.Restart,
		Reason: fmt.Sprintf("restarting %s of member %x: %s (spec %s)", what, id, in.Local.Restart.Why, in.Generation)}
}

// restartedCatchingUp keeps the cluster lock with a member restarted for a
// rollout until it has caught up with the leader (model.CaughtUp): the
// next member goes only once this one can carry writes again. The lock's
// longest hold (agent.learnerTimeout) bounds it.
func restartedCatchingUp(in Input) (Action, bool) {
	l := in.Local
	if !l.Restarted || !l.LockHeld || in.Cluster == nil {
		return Action{}, false
	}
	m, ok := in.Cluster.Member(l.Answer.MemberID)
	if !ok || m.CaughtUp {
		return Action{}, false
	}
	lag := m.Lag
	if lag == "" {
		lag = in.Self.Name + " is not caught up with the leader"
	}
	return wait("restarted-catching-up", "restarted for a rollout; keeping the cluster lock until it has caught up: %s", lag), true
}

// rolloutHold names the member, other than id, that is not a healthy
// started voter, with what its agent says; "" when every other is one.
func rolloutHold(in Input, id uint64) string {
	var held []string
	for _, m := range in.Cluster.Members {
		if m.ID == id {
			continue
		}
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("%x", m.ID)
		}
		var what string
		switch {
		case m.Unstarted():
			what = name + " is added but not started (a join is under way)"
		case m.IsLearner:
			what = name + " is a learner (a join or repair is under way)"
		case !m.Healthy:
			what = name + " is not a healthy voter"
			if m.Err != "" {
				what += " (" + m.Err + ")"
			}
		default:
			continue
		}
		if r, ok := recordOf(in.Agents, name); ok && r.Decision != "" {
			what += "; its agent: " + r.Decision
		}
		held = append(held, what)
	}
	return strings.Join(held, "; ")
}

// othersFirst says why the leader's turn has not come: another agent has
// a restart pending, or runs another spec generation; "" when it has.
func othersFirst(in Input) string {
	if in.Agents == nil {
		return "cannot read the agents' records"
	}
	var pending, skew []string
	for _, r := range in.Agents {
		if r.Name == in.Self.Name {
			continue
		}
		if r.RestartPending != "" {
			pending = append(pending, r.Name)
		}
		if r.Generation != in.Generation {
			skew = append(skew, fmt.Sprintf("%s runs spec generation %s", r.Name, r.Generation))
		}
	}
	slices.Sort(pending)
	switch {
	case len(pending) > 0:
		return strings.Join(pending, ", ") + " restart first"
	case len(skew) > 0:
		return strings.Join(skew, "; ") + " (mine is " + in.Generation + ")"
	}
	return ""
}

// snapshotTaken: this agent, or another agent of the same rollout, took
// the verified snapshot the rollout begins with.
func snapshotTaken(in Input) bool {
	key := RolloutKey(in.Generation, in.Local.Restart)
	if in.Local.RolloutSnapshot == key {
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
