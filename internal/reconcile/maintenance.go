package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// DefragPolicy is maintenance.defrag as the decision reads it, or what
// the operator's request (`etcdkeeper defrag --yes`) asks for.
type DefragPolicy struct {
	Enabled      bool
	MinFreeRatio float64
	MinFreeBytes int64
	Window       spec.Window
	// Now: `etcdkeeper defrag` runs now: Enabled and Window do not apply.
	Now bool
	// Member: `etcdkeeper defrag --member NAME`: only that member, the
	// thresholds do not apply either. Every safety rule still does.
	Member string
	// Done are the members the operator's request (etcdkeeper defrag
	// --yes) had defragmented already (requestDone): not picked again by it.
	Done map[uint64]bool
	// Offline: a member whose agent runs may be defragmented offline by
	// it (maintenance.defrag.offline; defragWay).
	Offline bool
	// noSpace: the NOSPACE procedure's defragmentation (PlanNoSpace):
	// writes are refused already, so the others need only be a quorum of
	// the membership without the member, as for the lone member it
	// defragments in place; else they must be raft's quorum of every
	// voter (model.Cluster.QuorumStaysWithout).
	noSpace bool
}

// DefragPolicyOf is the spec's policy.
func DefragPolicyOf(d spec.Defrag) DefragPolicy {
	return DefragPolicy{Enabled: d.On(), MinFreeRatio: float64(d.MinFreeRatio), MinFreeBytes: int64(d.MinFreeBytes), Window: d.Window, Offline: d.OfflineOn()}
}

// PlanMaintenance decides the next maintenance step: the defragmentation
// of one member (StepDefrag), or, when that member leads, the move of its
// leadership first (StepMoveLeader; it is defragmented as a follower in a
// later pass). It is tried only after Plan found nothing to change (see
// converge), by the agent that then takes the cluster lock, so one member
// at a time is defragmented cluster-wide. StepNone: nothing due; StepWait:
// due, but Reason says why it waits.
//
// The rules, in order (the order is the point):
//  1. Nothing is due unless the policy is on (or asked for now) and a
//     member is past both thresholds (or named).
//  2. No maintenance beside a change that is not done: an alarm other
//     than NOSPACE (a CORRUPT alarm means diverged data; NOSPACE is what
//     a defragmentation cures), a learner or an unstarted member (a join
//     or a repair under way), a member that does not answer (its repair
//     or restart comes first, and it already costs the quorum a vote).
//  3. Only inside the window.
//  4. The member most in need first (most bytes to free), followers
//     before the leader (the leader only once no follower is due, even
//     one that waits): a leader that stalls on its defragmentation stops
//     the cluster's writes and may lose its lease, a follower only slows
//     down itself. For each, in that order: it must be caught up
//     (model.CaughtUp: a member that lags would fall further behind while
//     its db is rewritten), and the caught-up voters without it must be a
//     quorum of every voter, it included (while it stalls, writes commit
//     without it; QuorumStaysWithout). The first that
//     passes is the step; when none does, the first one's wait.
//  5. The way: offline, by the member's own agent (StepDefragOffline),
//     or online, by the lock holder (StepDefrag): defragWay, which
//     reads the agents' records (nil: not read, online).
func PlanMaintenance(desired []spec.Member, obs model.Cluster, agents []model.AgentRecord, pol DefragPolicy) Step {
	v := newPlanView(desired, obs)
	return planMaintenance(budget{plan: v, agents: agents}, pol)
}

func planMaintenance(b budget, pol DefragPolicy) Step {
	v, obs := b.plan, b.plan.cluster
	if v.leader == nil {
		return waitStep("defrag waits: " + strings.TrimPrefix(noLeaderReason(obs, v), "waiting: "))
	}
	due, step, ok := v.defragDue(pol)
	if !ok {
		return step
	}
	if block := v.maintenanceBlocker(pol); block != "" {
		return waitStep(fmt.Sprintf("defrag %s waits: %s", due[0].label, block))
	}
	return v.defragFirst(b, due, pol)
}

// defragFirst is the defragmentation of the first of due (in order) the
// budget grants, or the first one's wait.
func (v *planView) defragFirst(b budget, due []planMember, pol DefragPolicy) Step {
	var blocked *Step
	for _, m := range due {
		step := v.defragStep(b, m, due, pol)
		if step.Kind != StepWait {
			return step
		}
		if blocked == nil {
			blocked = &step
		}
	}
	return *blocked
}

// DefragFloor is the least a defragmentation due by the thresholds must
// free, whatever minFreeBytes says: below it the member's stall buys
// nothing, and thresholds of 0 would defragment a packed db every pass (a
// db just defragmented still shows a few free pages).
const DefragFloor = 1 << 20

// fragmented: m's free share and free bytes reach the thresholds.
func (pol DefragPolicy) fragmented(m model.Member) bool {
	return m.DBSize > 0 && m.FreeRatio() >= pol.MinFreeRatio && m.FreeBytes() >= max(pol.MinFreeBytes, DefragFloor)
}

// DefragDue says whether the policy makes m due for a defragmentation at
// now: enabled, inside the window, the thresholds reached. The agents
// defragment such a member unless a rule holds them (a member down or
// lagging, another maintenance, a pause); the metric
// etcdkeeper_member_defrag_due, on which EtcdkeeperDBFragmented fires.
func DefragDue(pol DefragPolicy, m model.Member, now time.Time) bool {
	return pol.Enabled && !m.IsLearner && pol.Window.Contains(now) && pol.fragmented(m)
}

// defragDue is rule 1: the members due, most in need first and the leader
// last; or the answer when none is.
func (v *planView) defragDue(pol DefragPolicy) ([]planMember, Step, bool) {
	if pol.Member != "" {
		for _, m := range v.members {
			if m.label == pol.Member && pol.Done[m.ID] {
				return nil, Step{Kind: StepNone, Reason: fmt.Sprintf("%s is defragmented", m.label)}, false
			}
			if m.label == pol.Member && !m.IsLearner && !m.Unstarted() {
				return []planMember{m}, Step{}, true
			}
		}
		return nil, waitStep(fmt.Sprintf("defrag %s waits: the cluster has no started voter of that name", pol.Member)), false
	}
	if !pol.Enabled && !pol.Now {
		return nil, Step{Kind: StepNone, Reason: "no maintenance: maintenance.defrag.enabled is false"}, false
	}
	var due []planMember
	for _, m := range v.members {
		if !m.IsLearner && !pol.Done[m.ID] && pol.fragmented(m.Member) {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		if m, ok := v.sizeUnknown(pol); ok {
			// Out of service (stopped for its offline defragmentation, or
			// rewriting its db online), a member reports no size: none due
			// is not known, and an operator's request is not done.
			return nil, waitStep(fmt.Sprintf("defrag waits: %s does not answer (its db size is unknown)", m.label)), false
		}
		return nil, Step{Kind: StepNone, Reason: fmt.Sprintf("no maintenance due (defragment at %.0f%% and %s free)",
			pol.MinFreeRatio*100, spec.Size(max(pol.MinFreeBytes, DefragFloor)))}, false
	}
	return v.leaderLast(due), Step{}, true
}

// sizeUnknown is a started voter, not done already, that did not answer
// (its db size is not known).
func (v *planView) sizeUnknown(pol DefragPolicy) (planMember, bool) {
	for _, m := range v.members {
		if !m.IsLearner && !m.Unstarted() && !pol.Done[m.ID] && !m.serving() {
			return m, true
		}
	}
	return planMember{}, false
}

// leaderLast orders members due for a defragmentation: most to free
// first, the leader after every follower (the budget holds it while one
// is due, even one that waits).
func (v *planView) leaderLast(due []planMember) []planMember {
	slices.SortStableFunc(due, func(a, b planMember) int {
		if aLeads, bLeads := a.ID == v.leader.ID, b.ID == v.leader.ID; aLeads != bLeads {
			return trueFirst(bLeads)
		}
		return compareIDs(uint64(b.FreeBytes()), uint64(a.FreeBytes()))
	})
	return due
}

// maintenanceBlocker is rules 2 and 3 beyond the budget's: no alarm but
// NOSPACE, and inside the window; or "" when that holds.
func (v *planView) maintenanceBlocker(pol DefragPolicy) string {
	for _, a := range v.cluster.Alarms {
		if a.Type != model.AlarmNoSpace {
			return fmt.Sprintf("a %s alarm is raised on member %x", a.Type, a.MemberID)
		}
	}
	if !pol.Now && pol.Member == "" && !pol.Window.Contains(v.now) {
		return "outside the window " + pol.Window.String()
	}
	return ""
}

// allServing is what the NOSPACE procedure needs of every member before
// it disarms or defragments: the sizes to disarm on are every member's.
func (v *planView) allServing() string {
	var notes []string
	for _, m := range v.members {
		switch {
		case m.Unstarted():
			notes = append(notes, m.label+" is added but not started (a join is under way)")
		case m.IsLearner:
			notes = append(notes, m.label+" is a learner (a join or repair is under way)")
		case !m.Healthy:
			notes = append(notes, m.label+" does not answer (its agent restarts or repairs it first; is etcdkeeper running on its host?)")
		}
	}
	return strings.Join(notes, "; ")
}

// defragStep is rule 4 for one member: the budget's grant (caught up, a
// caught-up quorum without it, one member at a time, the leader last
// after a hand-off); due are the members due with it.
func (v *planView) defragStep(b budget, m planMember, due []planMember, pol DefragPolicy) Step {
	why := fmt.Sprintf("%s of %s free", fmtBytes(m.FreeBytes()), fmtBytes(m.DBSize))
	if pol.Member != "" {
		why += ", asked for"
	}
	var queue Queue
	for _, d := range due {
		if d.ID != m.ID {
			queue.Requests = append(queue.Requests, Request{Member: d.ID, Kind: DisruptDefrag, Name: d.label})
		}
	}
	g := b.grant(Request{Member: m.ID, Kind: DisruptDefrag, Why: why}, queue, pol.noSpace)
	switch {
	case g.NoQuorum:
		return waitStep(fmt.Sprintf("defrag %s waits: without it %s", m.label, g.Wait))
	case !g.Granted():
		return waitStep(fmt.Sprintf("defrag %s waits: %s", m.label, g.Wait))
	case g.HandOff != nil:
		return *g.HandOff
	}
	if offline, online := defragWay(b, m, pol); offline {
		return Step{Kind: StepDefragOffline, MemberID: m.ID, Name: m.name(),
			Reason: fmt.Sprintf("defragment %s offline: %s (its agent stops etcd, rewrites the db, starts it)", m.label, why)}
	} else if online != "" {
		why += "; " + online
	}
	return Step{Kind: StepDefrag, MemberID: m.ID, Name: m.name(),
		Reason: fmt.Sprintf("defragment %s: %s", m.label, why)}
}

// fmtBytes writes a size for people: 1.2 GiB, 840.0 MiB, 512 B.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit && exp < 3; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}

// FmtBytes is fmtBytes for the agent's logs and the CLI.
func FmtBytes(n int64) string { return fmtBytes(n) }

// NoSpaceCommandWait is what `etcdkeeper defrag` and `leader move` say
// under NOSPACE: the leader's agent then takes the procedure's steps
// without the cluster lock (etcd refuses its lease), so a command that
// holds the lock would be a second actor beside it.
const NoSpaceCommandWait = "NOSPACE is raised: nothing changed (etcd refuses the cluster lock's lease until it is cleared; the agents run the NOSPACE procedure, compact, defragment, disarm, without it)"

// DefragCommand is `etcdkeeper defrag`'s decision before each of its
// steps, on a fresh observation under the cluster lock: the agents' own
// order, NOSPACE first (the command may have begun before it was
// raised; the lock it holds does not keep the leader's agent from
// acting then), membership next (Plan must have nothing to change), then
// PlanMaintenance with pol.
func DefragCommand(desired []spec.Member, obs model.Cluster, agents []model.AgentRecord, pol DefragPolicy, learnerTimeout time.Duration) Step {
	if NoSpaceRaised(obs) {
		return waitStep(NoSpaceCommandWait)
	}
	if step := Plan(desired, obs, Options{LearnerTimeout: learnerTimeout}); step.Kind != StepNone {
		return waitStep("membership first: the agents' next change is: " + step.Reason)
	}
	pol.Now = true
	return PlanMaintenance(desired, obs, agents, pol)
}

// LeaderMove is `etcdkeeper leader move --to NAME`'s decision: the move
// of leadership to the voter named to, which must be in the spec, healthy
// and caught up (model.CaughtUp): a leader that lags would stall the
// writes until it has caught up. Not under NOSPACE: the leader's agent
// moves leadership itself then, without the lock (NoSpaceCommandWait).
func LeaderMove(desired []spec.Member, obs model.Cluster, to string) Step {
	if NoSpaceRaised(obs) {
		return waitStep(NoSpaceCommandWait)
	}
	v := newPlanView(desired, obs)
	if v.leader == nil {
		return waitStep(noLeaderReason(obs, v))
	}
	var target *planMember
	for i, m := range v.members {
		if m.label == to && !m.Unstarted() {
			target = &v.members[i]
		}
	}
	switch {
	case target == nil:
		return waitStep(fmt.Sprintf("not moving leadership to %s: the cluster has no started member of that name", to))
	case target.ID == v.leader.ID:
		return Step{Kind: StepNone, Reason: fmt.Sprintf("%s leads already", to)}
	case target.spec == nil:
		return waitStep(fmt.Sprintf("not moving leadership to %s: the spec does not list it (it is due for removal)", to))
	case target.IsLearner:
		return waitStep(fmt.Sprintf("not moving leadership to %s: it is a learner", to))
	case !target.serving():
		return waitStep(fmt.Sprintf("not moving leadership to %s: it does not answer", to))
	case !target.CaughtUp:
		return waitStep(fmt.Sprintf("not moving leadership to %s: %s", to, v.view.LagOf(target.ID)))
	}
	return Step{Kind: StepMoveLeader, MemberID: v.leader.ID, Name: v.leader.name(), To: target.ID,
		Reason: fmt.Sprintf("move leader from %s to %s (applied index %d): asked for", v.leader.label, target.label, target.RaftIndex)}
}
