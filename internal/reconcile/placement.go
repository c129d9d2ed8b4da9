package reconcile

import (
	"fmt"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// PlacementEvery is the least time between two leader moves the agents
// make for the leader placement, cluster-wide: each costs the cluster's
// writes a moment (etcd's leader transfer), and a verdict that wavers
// must not bounce leadership around.
const PlacementEvery = 10 * time.Minute

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
// after the membership is as the spec wants it and after an operator's
// request and a host's turn, before defragmentation, by the agent that
// takes the cluster lock for it. The rules, in order:
//  1. Nothing to place without a leader, or when no member that could
//     take over fits better (placeRank).
//  2. It waits beside a disruption (a member out of service: its restart,
//     turn or repair settles first; the hand-offs of those already go to
//     the best fit) and beside an alarm.
//  3. At most one move in PlacementEvery, cluster-wide (last: the newest
//     of the agents' records and this agent's own memory).
//
// StepNone: nothing to do; StepWait: due, Reason says why it waits;
// StepMoveLeader: the move, and what (PlaceSlowDisk, ...) it is for.
func planPlacement(b budget, last time.Time) (Step, string) {
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
	if since := v.now.Sub(last); !last.IsZero() && since < PlacementEvery {
		return waitStep(fmt.Sprintf("%s; the leader was moved for its placement %s ago: the next move in %s (one in %s at most)",
			why, Approx(since), Approx(PlacementEvery-since), Approx(PlacementEvery))), what
	}
	step := v.moveLeaderFor(*v.leader, "a move of leadership", why, v.canLead)
	if step.Kind == StepMoveLeader {
		to, _ := v.view.Member(step.To)
		step.Reason = fmt.Sprintf("move leader from %s to %s: %s", v.leader.label, to.Name, why)
	}
	return step, what
}

// lastPlaced is when leadership was last moved for its placement, as far
// as this agent knows.
func lastPlaced(in Input) time.Time {
	last := in.View().LeaderPlaced
	if in.Memory.LeaderPlaced.After(last) {
		last = in.Memory.LeaderPlaced
	}
	return last
}
