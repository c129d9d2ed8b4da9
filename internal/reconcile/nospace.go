package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// NoSpacePolicy is maintenance.nospace as the decision reads it, with the
// spec's quota-backend-bytes by member name (a raise the members have not
// restarted with yet).
type NoSpacePolicy struct {
	Compact bool
	Quotas  map[string]int64
	// RaisedFor is how long the deciding agent has seen NOSPACE raised:
	// the agents that take no step judge a member full by its data in
	// use only after NoSpaceSettle (see settledAt).
	RaisedFor time.Duration
}

// NoSpacePolicyOf is the spec's policy.
func NoSpacePolicyOf(s *spec.Spec) NoSpacePolicy {
	return NoSpacePolicy{Compact: s.Maintenance.NoSpace.Compacts(), Quotas: s.Quotas()}
}

// DisarmBelow is the share of its quota every member's db file must be
// below before NOSPACE is disarmed: a db at its quota would raise the
// alarm again with the first writes.
const DisarmBelow = 0.9

// NoSpaceRaised: etcd raised a NOSPACE alarm, or a member's db file
// reached its quota (the next write raises it).
func NoSpaceRaised(obs model.Cluster) bool {
	for _, a := range obs.Alarms {
		if a.Type == model.AlarmNoSpace {
			return true
		}
	}
	for _, m := range obs.Members {
		if m.Quota > 0 && m.DBSize >= m.Quota {
			return true
		}
	}
	return false
}

// NoSpaceSeen is whether NOSPACE is raised as far as one pass can tell,
// given whether it was at the last pass that could (was). Only a
// member's status lists the alarms: an observation in which none answered
// (all busy, a partition) says nothing of the cluster, and the local
// member's own alarms, or what was, stand for it; a pass that observed
// nothing at all (the local etcd starts or restarts, e.g. for a raised
// quota) knows nothing: NOSPACE is what it was, not cleared.
func NoSpaceSeen(c *model.Cluster, local *model.Answer, was bool) (raised, known bool) {
	answered := c != nil && slices.ContainsFunc(c.Members, func(m model.Member) bool { return m.Err == "" })
	switch {
	case answered:
		return NoSpaceRaised(*c), true
	case local == nil:
		return was, false
	}
	return model.Alarmed(local.Alarms, local.MemberID, model.AlarmNoSpace) || was, true
}

// overLine: m's db file is at DisarmBelow of its quota or more.
func overLine(size, quota int64) bool {
	return quota > 0 && float64(size) >= DisarmBelow*float64(quota)
}

// PlanNoSpace decides the next step of etcd's own NOSPACE procedure
// (etcd's docs, "Space quota"): compact, defragment, disarm. rev is the
// store's current revision, compacted the one the procedure last
// compacted to, defragged what it measured when it defragmented each
// member (nil: not known, see settledAt), now the time. StepNone: no
// NOSPACE; StepWait and StepFull: Reason says why nothing can be done now.
//
// Every step is safe to take again, so a procedure cut short (the agent
// killed, the leader moved) resumes from a new observation: a compaction
// to a revision already compacted is refused at once (ErrCompacted, taken
// as done), a defragmentation is atomic per member and may run again, a
// disarm of an alarm no longer raised is a no-op.
//
// The rules, in order (the order is the point):
//  1. Nothing unless NOSPACE is raised (or a db file reached its quota).
//  2. Not beside a CORRUPT alarm (diverged data comes first), and not
//     without a leader (compaction and disarm are raft proposals).
//  3. Compact to the current revision, unless maintenance.nospace.compact
//     is false: writes are refused anyway, so the history helps no one
//     (watchers relist), and it is what turns deleted keys into free
//     pages. Again after deletes moved the revision on.
//  4. When the data in use of a member at the disarm line fills
//     DisarmBelow of its quota (as a defragmentation measured it, and
//     nothing freed since, see settledAt), a defragmentation cannot bring
//     it below:
//     disarming would only trip again. StepFull says so (raise
//     quota-backend-bytes or delete data); a raise in the spec that the
//     members have not restarted with yet is a wait for those restarts.
//  5. Every member must answer, none join (the sizes to disarm on are
//     every member's).
//  6. When every member's db file is below DisarmBelow of its quota,
//     disarm (and the agent checks that a put succeeds).
//  7. Else defragment the members at the line (not defragmented yet, or
//     freed since, see settledAt) by the maintenance rules
//     (PlanMaintenance's rule 4: followers first, most to free first, the
//     leader last after a leader move, each caught up with a quorum
//     without it). A one-member cluster is defragmented in place: its
//     writes are refused already, and nobody could take over.
func PlanNoSpace(desired []spec.Member, obs model.Cluster, rev, compacted int64, defragged map[uint64]model.DefragMark, pol NoSpacePolicy, now time.Time) Step {
	v := newPlanView(desired, obs)
	return planNoSpace(budget{plan: v}, rev, compacted, defragged, pol, now)
}

func planNoSpace(b budget, rev, compacted int64, defragged map[uint64]model.DefragMark, pol NoSpacePolicy, now time.Time) Step {
	v, obs := b.plan, b.plan.cluster
	if !NoSpaceRaised(obs) {
		return Step{Kind: StepNone, Reason: "no NOSPACE alarm"}
	}
	for _, a := range obs.Alarms {
		if a.Type != model.AlarmNoSpace {
			return waitStep(fmt.Sprintf("NOSPACE procedure waits: a %s alarm is raised on member %x", a.Type, a.MemberID))
		}
	}
	if v.leader == nil {
		return waitStep("NOSPACE procedure waits: no leader")
	}
	if pol.Compact && rev > compacted {
		return Step{Kind: StepCompact, Revision: rev,
			Reason: fmt.Sprintf("compact to revision %d: NOSPACE is raised and writes are refused, so the history helps no one", rev)}
	}
	below := DataBelow(obs)
	settled := func(m planMember) bool { return settledAt(m.Member, defragged, below, pol.RaisedFor, now) }
	if step, full := v.dataFills(pol, settled, defragged != nil); full {
		return step
	}
	if block := v.allServing(); block != "" {
		return waitStep("NOSPACE procedure waits: " + block)
	}
	var over []planMember
	for _, m := range v.members {
		if !m.IsLearner && overLine(m.DBSize, m.Quota) {
			over = append(over, m)
		}
	}
	if len(over) == 0 {
		return v.disarmStep()
	}
	over = slices.DeleteFunc(over, settled)
	if len(over) == 0 {
		return waitStep("NOSPACE procedure waits: every member at the line is defragmented")
	}
	over = v.leaderLast(over)
	if v.view.Voters == 1 {
		m := over[0]
		return Step{Kind: StepDefrag, MemberID: m.ID, Name: m.name(),
			Reason: fmt.Sprintf("defragment %s in place (%s of %s free; NOSPACE: its writes are refused already, and no other voter could take over)",
				m.label, fmtBytes(m.FreeBytes()), fmtBytes(m.DBSize))}
	}
	step := v.defragFirst(b, over, DefragPolicy{Now: true, noSpace: true})
	if m, ok := obs.Member(step.MemberID); ok && step.Kind == StepDefrag {
		step.Reason = fmt.Sprintf("%s (NOSPACE: %s of a %s quota)", step.Reason, fmtBytes(m.DBSize), fmtBytes(m.Quota))
	}
	return step
}

// settledAt: m's sizes tell the truth. etcd updates dbSizeInUse only when
// its backend begins a write transaction, and under NOSPACE little writes.
// Measured with etcd 3.7.3, 3 members, 16 MiB quota, ~160 keys of 100 KiB
// of which 98 % deleted, then a physical compaction through one member:
// that member said 0.4 MiB in use, the other two 15.5–18.1 MiB, still
// after 2 s and after deletes of an absent key; in one of four runs all
// three kept their old figure. A defragmentation sets both sizes exactly.
// So the agent that defragments remembers what it measured of each member
// (defragged; forgotten, the member is defragmented again), and a member
// it measured full (its data in use at the line) is settled until
//   - some member's data in use, as etcd reports it, is below the line
//     and was not when the member was measured (below: DataBelow; a
//     figure lags high, not low, and the members hold the same data, in
//     layouts a few per cent apart): deletes and a compaction (the
//     procedure's, or one by hand with compaction off) freed space, and
//     a defragmentation gives it back; or
//   - NoSpaceRemeasure has passed: figures that all lag are measured
//     again, rarely.
//
// Deletes that free little (a lease expiring every few seconds, moving
// the revision on) do not defragment the members again and again. A
// member measured with its data below the line is settled (a db file just
// over the line by the few free pages a defragmentation leaves is as small
// as it gets). Without that memory (the other agents, `etcdkeeper
// status`) a member with under 1 % of its db free counts as measured, and
// so does one whose data in use is at the line once NOSPACE has been
// raised for NoSpaceSettle (raisedFor, 0: not known: the actor has
// compacted and measured by then), unless some member's is below it.
func settledAt(m model.Member, defragged map[uint64]model.DefragMark, below bool, raisedFor time.Duration, now time.Time) bool {
	if defragged == nil {
		return m.DBSize > 0 && (float64(m.FreeBytes()) < 0.01*float64(m.DBSize) ||
			raisedFor >= NoSpaceSettle && overLine(m.DBSizeInUse, m.Quota) && !below)
	}
	mark, ok := defragged[m.ID]
	if !ok || now.Sub(mark.At) >= NoSpaceRemeasure || m.DBSize > mark.Size+m.Quota/100 {
		// No measure, an old one, or one the file outgrew (writes since:
		// a measure from before this NOSPACE).
		return false
	}
	// Figures of members with other page layouts differ by a few per
	// cent (a defragmentation packs pages to 90 %): near the line one may
	// stay below while this one measures over it. Only news counts, or a
	// member would be defragmented again and again.
	return !below || !overLine(mark.InUse, m.Quota) || mark.Below
}

// DataBelow: some voter that answered reports its data in use below the
// NOSPACE line (DisarmBelow of its quota).
func DataBelow(obs model.Cluster) bool {
	return slices.ContainsFunc(obs.Members, func(m model.Member) bool {
		// A member that did not answer, or reports no figure, says
		// nothing.
		return !m.IsLearner && m.Err == "" && m.DBSize > 0 && m.DBSizeInUse > 0 && m.Quota > 0 && !overLine(m.DBSizeInUse, m.Quota)
	})
}

// NoSpaceSettle is how long NOSPACE must have been raised before the
// agents that take no step trust etcd's figure of a member's data in use
// at the line: the actor compacts (and measures) first.
const NoSpaceSettle = time.Minute

// NoSpaceRemeasure is how long a defragmentation's measure of a member
// stands under NOSPACE while its data fills the quota and etcd's figures
// show nothing freed.
const NoSpaceRemeasure = 10 * time.Minute

// dataFills is rule 4, for the members whose sizes are settled. measured:
// settled means a defragmentation since which nothing was freed (the
// actor's memory): its db file at the line is as small as it gets, even
// when the few free pages a defragmentation leaves put the data just under
// the line. Without that memory, only data in use at the line counts.
func (v *planView) dataFills(pol NoSpacePolicy, settled func(planMember) bool, measured bool) (Step, bool) {
	for _, m := range v.members {
		if m.IsLearner || !overLine(m.DBSize, m.Quota) || (!measured && !overLine(m.DBSizeInUse, m.Quota)) || !settled(m) {
			continue
		}
		what := fmt.Sprintf("data in use %s of a %s quota on %s", fmtBytes(m.DBSizeInUse), fmtBytes(m.Quota), m.label)
		if q := pol.Quotas[m.Name]; q > m.Quota {
			return waitStep(fmt.Sprintf("NOSPACE procedure waits: %s; the spec raises quota-backend-bytes to %s: the members restart with it one at a time",
				what, fmtBytes(q))), true
		}
		todo := "raise etcd quota-backend-bytes or delete data"
		if !pol.Compact {
			// The old revisions of deleted keys take space until a
			// compaction, which the spec leaves to someone else.
			todo = "raise etcd quota-backend-bytes, delete data, or compact (maintenance.nospace.compact is false: the agents do not)"
		}
		return Step{Kind: StepFull, MemberID: m.ID, Name: m.name(),
			Reason: what + ": " + todo + " (NOSPACE stays raised: disarming would only trip again)"}, true
	}
	return Step{}, false
}

// disarmStep is rule 6: the NOSPACE alarms, or nothing when only a db at
// its quota raised the procedure and it is below the line again.
func (v *planView) disarmStep() Step {
	var alarms []model.Alarm
	for _, a := range v.cluster.Alarms {
		if a.Type == model.AlarmNoSpace {
			alarms = append(alarms, a)
		}
	}
	if len(alarms) == 0 {
		return Step{Kind: StepNone, Reason: "no NOSPACE alarm"}
	}
	return Step{Kind: StepDisarm, Alarms: alarms,
		Reason: fmt.Sprintf("disarm NOSPACE: every member's db file is below %.0f%% of its quota", DisarmBelow*100)}
}

// quotaRaiseTurn is the order in which the members restart to apply a
// quota-backend-bytes the spec raised while NOSPACE is raised, for the
// local member: the members whose reported quota is below the spec's go
// followers by member ID, the leader last (a member that restarted
// reports its new quota and drops out). Under NOSPACE the cluster lock
// cannot be taken, so the turn is what keeps the unlocked restarts one at
// a time: only the first may ask the budget (grant), with the others as
// its queue. nil: it is not this member's turn, or it has no raise due;
// why says so, or why it is due.
func quotaRaiseTurn(in Input) (*Queue, string) {
	obs, self, pol := *in.Cluster, in.Local.Answer.MemberID, in.NoSpace
	var due []model.Member
	for _, m := range obs.Members {
		if q := pol.Quotas[m.Name]; !m.IsLearner && m.Quota > 0 && q > m.Quota {
			due = append(due, m)
		}
	}
	slices.SortStableFunc(due, func(a, b model.Member) int {
		if aLeads, bLeads := a.ID == obs.LeaderID, b.ID == obs.LeaderID; aLeads != bLeads {
			return trueFirst(bLeads)
		}
		return compareIDs(a.ID, b.ID)
	})
	if !slices.ContainsFunc(due, func(m model.Member) bool { return m.ID == self }) {
		return nil, "under NOSPACE only a raise of quota-backend-bytes restarts a member (the cluster lock cannot be taken): the other settings wait until the alarm is cleared"
	}
	if due[0].ID != self && !in.Local.LockHeld {
		return nil, fmt.Sprintf("quota-backend-bytes raised under NOSPACE: %s restarts first", due[0].Name)
	}
	q := &Queue{}
	for _, m := range due[1:] {
		q.Requests = append(q.Requests, Request{Member: m.ID, Kind: DisruptRestart, Name: m.Name})
	}
	return q, fmt.Sprintf("quota-backend-bytes raised to %s under NOSPACE: restarting with it (its turn: followers by member ID, the leader last)",
		fmtBytes(pol.Quotas[due[0].Name]))
}

// noSpace is the NOSPACE procedure in the agent's decision: PlanNoSpace's
// step, taken by one agent only, without the cluster lock.
//
// The lock is a lease and a key: under NOSPACE etcd refuses both (its
// capped applier, server/etcdserver/apply/capped.go in etcd 3.7, refuses
// Put, any Txn that puts, and LeaseGrant; compaction, DeleteRange and
// deleting Txns, Defragment, Alarm and MoveLeader are not refused), so no
// agent could take it. The single actor comes from the observation
// instead: the agent of the leader (noSpaceActor). Raft has at most one
// leader per term and each agent learns whether its own member leads from
// that member itself; a health-based choice (the lowest healthy ID) would
// move on while the chosen member defragments, since a member answers no
// status call then. The leader is never defragmented as leader: it hands
// its leadership over first, and the new leader's agent goes on. Every
// step is idempotent (PlanNoSpace), so two agents that briefly both took
// themselves for the actor (a leader change between two observations)
// repeat a step at worst; a defragmentation stays one member at a time
// because a member under defragmentation answers nothing, and the rule
// then waits (rule 5).
func noSpace(in Input) (Action, bool) {
	if !NoSpaceRaised(*in.Cluster) {
		return Action{}, false
	}
	actor, label := noSpaceActor(in)
	// The actor decides on its memory of what it compacted and
	// defragmented; the others, which take no step, on the sizes alone
	// (settledAt), with the compaction taken as done: only the actor
	// knows it, and the others would say "next: compact" for as long as
	// NOSPACE lasts, where the data may fill the quota.
	var defragged map[uint64]model.DefragMark
	compacted := in.Local.Answer.Revision
	if actor == in.Local.Answer.MemberID {
		compacted, defragged = in.Memory.Compacted, in.Memory.Defragmented
		if defragged == nil {
			defragged = map[uint64]model.DefragMark{}
		}
	}
	pol := in.NoSpace
	pol.RaisedFor = in.Memory.NoSpaceFor
	step := planNoSpace(budgetOf(in), in.Local.Answer.Revision, compacted, defragged, pol, in.Now)
	key := fmt.Sprintf("nospace/%s/%x", step.Kind, step.MemberID)
	switch step.Kind {
	case StepNone:
		return Action{}, false
	case StepWait:
		reason := step.Reason
		if !strings.HasPrefix(reason, "NOSPACE") {
			reason = "NOSPACE: " + reason
		}
		return Action{Kind: DoWait, Reason: reason, Key: "nospace-wait/" + numberless(step.Reason), ReleaseLock: true, Topic: TopicNoSpace}, true
	case StepFull:
		return Action{Kind: DoWait, Reason: "NOSPACE: " + step.Reason, Key: "nospace-full/" + numberless(step.Reason), Step: step, ReleaseLock: true, Topic: TopicNoSpace}, true
	}
	if actor != in.Local.Answer.MemberID {
		return Action{Kind: DoWait, Key: "nospace-other/" + key, ReleaseLock: true, Topic: TopicNoSpace,
			Reason: fmt.Sprintf("NOSPACE: the agent of %s takes the procedure's steps (next: %s)", label, step.Reason)}, true
	}
	act := Action{Key: key, Step: step, Unlocked: true, ReleaseLock: true, Topic: TopicNoSpace, Reason: "NOSPACE: " + step.Reason}
	if step.Kind == StepDisarm {
		act.Reason = "NOSPACE: disarm: " + strings.TrimPrefix(step.Reason, "disarm NOSPACE: ")
	}
	switch step.Kind {
	case StepCompact:
		act.Kind = DoCompact
	case StepDisarm:
		act.Kind, act.Alarms = DoDisarm, step.Alarms
	case StepDefrag:
		act.Kind = DoDefrag
	default: // StepMoveLeader
		act.Kind = DoChangeMembership
		act.Reason = fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)
	}
	return act, true
}

// noSpaceActor is the member whose agent takes the NOSPACE procedure's
// steps: the leader. When the agents' records (read under NOSPACE) show
// no live agent for the leader's member, the agent with a record of the
// lowest healthy voter ID acts: a record is a leased key, and a dead
// agent's lease runs out (its revocation is a delete, which etcd allows
// under NOSPACE), so the records still tell who is alive.
func noSpaceActor(in Input) (uint64, string) {
	c := *in.Cluster
	label := func(id uint64) string {
		if m, ok := c.Member(id); ok && m.Name != "" {
			return m.Name
		}
		return fmt.Sprintf("member %x", id)
	}
	if in.Agents == nil || slices.ContainsFunc(in.Agents, func(r model.AgentRecord) bool { return r.MemberID == c.LeaderID }) {
		return c.LeaderID, label(c.LeaderID) + " (the leader)"
	}
	var low uint64
	for _, r := range in.Agents {
		if m, ok := c.Member(r.MemberID); ok && m.Healthy && !m.IsLearner && (low == 0 || r.MemberID < low) {
			low = r.MemberID
		}
	}
	if low == 0 {
		return c.LeaderID, label(c.LeaderID) + " (the leader)"
	}
	return low, label(low) + " (the lowest healthy voter with a live agent: the leader's agent is gone)"
}
