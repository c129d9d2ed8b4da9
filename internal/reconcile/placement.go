package reconcile

import (
	"fmt"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Why leadership is placed elsewhere, for the metric and the history.
const (
	PlaceSlowDisk = "slow-disk"
	PlaceAvoid    = "avoid"
	PlacePrefer   = "prefer"
)

// placeRank is how well m fits to lead, lower is better: a member the
// spec prefers, then one without a tag, then one it avoids, then one
// whose disk is slow (whatever its tag: etcd's writes wait on the
// leader's fsync).
func (v *planView) placeRank(m planMember) int {
	if _, slow := v.view.SlowDisk(m.ID); slow {
		return 3
	}
	if m.spec != nil {
		switch m.spec.Leader {
		case spec.LeaderPrefer:
			return 0
		case spec.LeaderAvoid:
			return 2
		}
	}
	return 1
}

// placement says why leadership belongs elsewhere than on the leader
// (what for the metric, why for people), or "" when it fits as well as
// any member that could take over.
func (v *planView) placement() (what, why string) {
	l := *v.leader
	rank := v.placeRank(l)
	best, bestRank := planMember{}, rank
	for _, c := range v.members {
		if c.ID != l.ID && v.canLead(c) && v.placeRank(c) < bestRank {
			best, bestRank = c, v.placeRank(c)
		}
	}
	switch {
	case bestRank == rank:
		return "", ""
	case rank == 3:
		s, _ := v.view.SlowDisk(l.ID)
		return PlaceSlowDisk, s.Text()
	case rank == 2:
		return PlaceAvoid, fmt.Sprintf("the spec says leader: avoid for %s", l.label)
	}
	return PlacePrefer, fmt.Sprintf("the spec says leader: prefer for %s", best.label)
}

// canLead: c may take leadership over: a started voter of the spec that
// serves, has caught up and is not out of service.
func (v *planView) canLead(c planMember) bool {
	if c.spec == nil || c.IsLearner || !c.serving() || !c.CaughtUp {
		return false
	}
	for _, d := range v.view.Disrupted {
		if d.ID == c.ID {
			return false
		}
	}
	return true
}

// planPlacement is the leader placement: when the leader's disk is slow,
// or the spec says leader: avoid for it, or leader: prefer for another
// member, and a member fits better, the leader's move there. It is tried
// once the membership is as the spec wants it, after an operator's
// request, a host's turn and a defragmentation that is due, by the agent
// that takes the cluster lock for it. The rules, in order:
//  1. Nothing to place without a leader, or when no member that could
//     take over fits better (placeRank).
//  2. It waits beside a disruption (a member out of service: its restart,
//     turn or repair settles first; the hand-offs of those already go to
//     the best fit), beside an alarm, and while a rollout is under way
//     (an agent with a restart pending, or on another spec generation:
//     the specs may disagree on the tags).
//  3. It waits model.LeaderMoveQuiet after any leader move of the agents
//     (the cluster's leader-moved key, under a lease: timed by the
//     cluster, whoever moved and whatever for): one move at most in that
//     time, and no rule undoes another's move at once (a hand-off before
//     a defragmentation, an operator's `leader move`).
//
// StepNone: nothing to do; StepWait: due, Reason says why it waits;
// StepMoveLeader: the move, and what (PlaceSlowDisk, ...) it is for.
func planPlacement(b budget) (Step, string) {
	v := b.plan
	if v.leader == nil {
		return Step{Kind: StepNone, Reason: "no leader"}, ""
	}
	what, why := v.placement()
	if what == "" {
		return Step{Kind: StepNone, Reason: "the leader fits"}, ""
	}
	if len(v.view.Disrupted) > 0 {
		d := v.view.Disrupted[0]
		return waitStep(fmt.Sprintf("%s; the leader move waits: %s is %s", why, d.Name, d.Why)), what
	}
	if len(v.view.Alarms) > 0 {
		a := v.view.Alarms[0]
		return waitStep(fmt.Sprintf("%s; the leader move waits: a %s alarm is raised on member %x", why, a.Type, a.MemberID)), what
	}
	if r := rolloutUnderWay(b.agents); r != "" {
		return waitStep(fmt.Sprintf("%s; the leader move waits for the rollout: %s", why, r)), what
	}
	if m := v.cluster.LeaderMoved; m != nil {
		return waitStep(fmt.Sprintf("%s; the leader move waits: the agents moved leadership in the last %s (%s), and the placement moves none sooner",
			why, Approx(model.LeaderMoveQuiet), m.Text())), what
	}
	step := v.moveLeaderFor(*v.leader, "a move of leadership", why, v.canLead)
	if step.Kind == StepMoveLeader {
		to, _ := v.view.Member(step.To)
		step.Reason = fmt.Sprintf("move leader from %s to %s: %s", v.leader.label, to.Name, why)
	}
	return step, what
}

// rolloutUnderWay says which agent has a restart pending or runs another
// spec generation ("": none).
func rolloutUnderWay(recs []model.AgentRecord) string {
	gens := map[string]bool{}
	for _, r := range recs {
		if r.RestartPending != "" {
			return fmt.Sprintf("%s's member is due for a restart (%s)", r.Name, r.RestartPending)
		}
		gens[r.Generation] = true
	}
	if len(gens) > 1 {
		return "the agents run different spec generations"
	}
	return ""
}
