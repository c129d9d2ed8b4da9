package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Disruption is a voluntary disruption of a member: it stops serving for
// a while and stays a member. Every one goes through the budget (grant):
// the rules that say what is due (rollingRestart, PlanMaintenance,
// PlanNoSpace, the quota raise, stopForRepair) decide what to change; the
// budget alone decides whether and in which order.
type Disruption int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=Disruption -linecomment
const (
	// DisruptRestart: etcd (and maybe the agent) restarts: settings, an
	// etcd binary, an agent binary, a raised quota.
	DisruptRestart Disruption = iota // restart
	// DisruptDefrag: the member rewrites its db file and answers no one
	// meanwhile (online defragmentation, the NOSPACE procedure's).
	DisruptDefrag // defrag
	// DisruptRepairStop: a member etcd found corrupt is stopped so that
	// its agent repairs it. It has failed already: it is stopped where it
	// stands (no hold for the others, no hand-off; etcd refuses writes
	// under its CORRUPT alarm anyway), only while the quorum holds.
	DisruptRepairStop // repair-stop
	// DisruptHost: the member's host takes its turn to be disrupted from
	// outside (etcdkeeper guard: a reboot, OS patching; maintenance
	// start: hand work). Its etcd may stop at any time in the turn, so
	// it is granted as a stop: one out of service, the caught-up others
	// a quorum, the leader last after a hand-off.
	DisruptHost // host-turn
	// DisruptAgent: the agent alone restarts onto a new binary and adopts
	// its running etcd (model.Restart.AgentOnly): the member keeps
	// serving, and keeps its leadership. Granted as a restart is (one at
	// a time, the caught-up others a quorum: should the new binary fail,
	// its etcd goes with it), without the leader's wait or hand-off.
	DisruptAgent // agent-restart
)

// Request asks the budget to disrupt Member for Kind.
type Request struct {
	Member uint64
	Kind   Disruption
	// Why it is due, for people (the hand-off's reason names it).
	Why string
	// Name names the member when the view may not (an agent's record).
	Name string
}

// Queue is the other requests pending beside one, as the requester knows
// them; Unknown says why they cannot be known (the leader then waits).
type Queue struct {
	Requests []Request
	Unknown  string
}

// what a disruption is called in a hand-off's reason.
func (d Disruption) what() string {
	switch d {
	case DisruptDefrag:
		return "defragmentation"
	case DisruptRepairStop:
		return "a repair"
	case DisruptHost:
		return "its host's turn"
	}
	return "a restart"
}

// Grant is the budget's answer to a request: Wait says why not now ("":
// granted); HandOff, when the member leads, is the leader move that
// comes first (the member is disrupted as a follower in a later pass).
type Grant struct {
	Wait    string
	HandOff *Step
	// LeaderLast: Wait is rule 6's, the leader's turn has not come;
	// NoQuorum: rule 5's, "the others have ...".
	LeaderLast, NoQuorum bool
}

// Granted: the member may be disrupted now (after HandOff, if any).
func (g Grant) Granted() bool { return g.Wait == "" }

// budget is what the disruption rule reads: the pass's view with the spec
// matched to it (plan.view), the agents' records (nil: not read), and whether another
// agent holds the cluster lock.
type budget struct {
	max           int
	plan          *planView
	agents        []model.AgentRecord
	lockElsewhere bool
}

// budgetOf is the pass's budget.
func budgetOf(in Input) budget {
	return budget{max: in.MaxDisrupted, plan: planViewOf(in.Desired, *in.Cluster, in.View()), agents: in.Agents, lockElsewhere: in.Local.LockHeldElsewhere}
}

// maxOut is how many members may be out of service at once for a
// voluntary disruption, the one granted included: maintenance.maxDisrupted,
// 1 below 5 voters (rule 5 keeps a caught-up quorum whatever it says).
func (b budget) maxOut() int {
	if b.max <= 1 || b.plan.view.Voters < 5 {
		return 1
	}
	return b.max
}

// grant is the one disruption rule. The rules, in order (the order is the
// point):
//  1. Under NOSPACE, a step taken without the cluster lock (the NOSPACE
//     procedure's single actor) waits while another agent holds the lock:
//     the holder took it before the alarm and may be restarting a member
//     (G3). No new lock can be taken under NOSPACE (etcd refuses the
//     lease), so the two never overlap.
//  2. One voter alone: a restart or a repair stop is granted (settings
//     and upgrades must reach it some time; nothing could serve meanwhile,
//     and nothing could take over); a defragmentation only under NOSPACE,
//     where its writes are refused already.
//  3. One member out of service at a time (maintenance.maxDisrupted may
//     allow more with 5 voters or more): while another
//     member is not a healthy started voter (down, restarting,
//     defragmented, joining, being repaired) the request waits, naming
//     it and what its agent says. A host turn is always one alone,
//     whatever maxDisrupted says: its host may stop the member at any
//     moment, for as long as the work takes, and nobody here sees that
//     coming. It is granted only while no other member is out, and
//     while it is held nothing else is granted, not even a
//     defragmentation of its own member. A repair stop does not wait
//     for this.
//  4. A defragmentation only of a member that has caught up: one that
//     lags would fall further behind while its db is rewritten.
//  5. Quorum: the caught-up voters other than the member must be raft's
//     quorum of every voter, it included (model.View.ReadyToStop). Under
//     NOSPACE writes are refused already, and a stop costs only the reads
//     the member serves: a quorum of the voters without it will do
//     (model.View.ReadyToRemove of a serving member), which is what lets
//     a two-member cluster out of NOSPACE.
//  6. The leader last: it waits while a request of a follower is pending.
//  7. The leader hands its leadership to a caught-up voter of the spec
//     first (a repair stop does not: the member has failed).
func (b budget) grant(req Request, pending Queue, unlocked bool) Grant {
	v, pv := b.plan.view, b.plan
	if unlocked && b.lockElsewhere {
		return Grant{Wait: "another agent holds the cluster lock (taken before NOSPACE): its step goes first"}
	}
	if v.Voters == 1 && (req.Kind != DisruptDefrag || v.NoSpace) {
		return Grant{}
	}
	m, _ := v.Member(req.Member)
	label := labelIn(pv, req.Member)
	if req.Kind != DisruptRepairStop {
		if held := disruptedOthers(b.agents, v, req, b.maxOut()); held != "" {
			return Grant{Wait: held}
		}
	}
	if req.Kind == DisruptDefrag && !m.CaughtUp {
		return Grant{Wait: v.LagOf(req.Member)}
	}
	ready, detail := v.ReadyToStop(req.Member)
	if v.NoSpace && !ready {
		ready, detail = v.ReadyToRemove(req.Member)
	}
	if !ready {
		return Grant{Wait: "the others have " + detail, NoQuorum: true}
	}
	if req.Member != v.Leader || req.Kind == DisruptRepairStop || req.Kind == DisruptAgent {
		return Grant{}
	}
	if first := followersFirst(pv, req.Member, pending); first != "" {
		return Grant{Wait: first, LeaderLast: true}
	}
	i := slices.IndexFunc(pv.members, func(c planMember) bool { return c.ID == req.Member })
	if i < 0 {
		return Grant{Wait: "the leader " + label + " is not among the cluster's members"}
	}
	step := pv.moveLeaderFor(pv.members[i], req.Kind.what(), req.Why, func(c planMember) bool { return c.serving() && c.CaughtUp })
	if step.Kind == StepWait {
		return Grant{Wait: fmt.Sprintf("%s leads, and no caught-up voter in the spec can take over", label)}
	}
	return Grant{HandOff: &step}
}

// disruptedOthers is rule 3 for req: the members out of service that
// hold it, with what their agents say; "" when it may go. A host turn
// goes alone: one asked waits for every other member, and one held
// holds every request, its own member's included.
func disruptedOthers(agents []model.AgentRecord, v model.View, req Request, maxOut int) string {
	out := v.DisruptedExcept(req.Member)
	turn := slices.IndexFunc(v.Disrupted, func(d model.Disruption) bool { return d.HostTurn })
	alone := ""
	switch {
	case turn >= 0:
		if v.Disrupted[turn].ID == req.Member {
			out = append([]model.Disruption{v.Disrupted[turn]}, out...)
		}
		if len(out) < maxOut {
			alone = " (nothing else while a host turn lasts, whatever maintenance.maxDisrupted says)"
		}
	case len(out) == 0:
		return ""
	case req.Kind == DisruptHost:
		if len(out) < maxOut {
			alone = " (a host turn waits until no other member is out of service, whatever maintenance.maxDisrupted says)"
		}
	case len(out) < maxOut:
		return ""
	}
	var held []string
	for _, d := range out {
		what := d.Name + " is " + d.Why
		if r, ok := recordOf(agents, d.Name); ok && r.Decision != "" {
			what += "; its agent: " + r.Decision
		}
		held = append(held, what)
	}
	return strings.Join(held, "; ") + alone
}

// followersFirst says, for rule 6, which followers go first ("node2,
// node3 restart first"), or why the leader cannot know ("": its turn).
func followersFirst(pv *planView, leader uint64, pending Queue) string {
	var names []string
	for _, p := range pending.Requests {
		if p.Member == leader {
			continue
		}
		name := p.Name
		if name == "" {
			name = labelIn(pv, p.Member)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if names = slices.Compact(names); len(names) > 0 {
		return strings.Join(names, ", ") + " " + verbOf(pending.Requests[0].Kind) + " first"
	}
	return pending.Unknown
}

func verbOf(d Disruption) string {
	switch d {
	case DisruptDefrag:
		return "defragment"
	case DisruptHost:
		return "take their host turns"
	}
	return "restart"
}

func labelIn(pv *planView, id uint64) string {
	for _, m := range pv.members {
		if m.ID == id {
			return m.label
		}
	}
	return fmt.Sprintf("member %x", id)
}
