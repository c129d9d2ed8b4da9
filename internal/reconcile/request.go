package reconcile

import (
	"fmt"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// request is the operator's request in the agent's decision: it is tried
// where maintenance is (converge: no alarm but NOSPACE, no NOSPACE, the
// membership as the spec wants it), decided by the same rules the agents
// use for their own maintenance (PlanMaintenance with the policy the
// command asks for, the disruption budget's grant; LeaderMove), and its
// steps are taken under the cluster lock by whichever agent takes it. A
// pause holds it as it holds everything (Decide). What each agent's pass
// made of it goes into its record (Action.Request), which the command
// follows.
func request(in Input, self string) (Action, bool) {
	r := in.Request
	if r == nil {
		return Action{}, false
	}
	what := requestWhat(r)
	var step Step
	switch r.Kind {
	case model.RequestDefrag:
		pol := in.Defrag
		pol.Now, pol.Member, pol.Done = true, r.Member, requestDone(in)
		step = planMaintenance(budgetOf(in), pol)
	case model.RequestLeaderMove:
		step = LeaderMove(in.Desired, *in.Cluster, r.To)
	default:
		step = waitStep(fmt.Sprintf("this agent does not know requests of kind %q (is it older than the command?)", r.Kind))
	}
	note := func(p model.RequestPhase, text string) *model.RequestProgress {
		return &model.RequestProgress{ID: r.ID, Phase: p, Text: text}
	}
	switch step.Kind {
	case StepNone:
		return Action{Kind: DoNothing, Reason: self + "; " + what + " done: " + step.Reason, Key: "request-done/" + r.ID,
			ReleaseLock: true, Request: note(model.RequestDone, step.Reason)}, true
	case StepWait:
		return Action{Kind: DoNothing, Reason: self + "; " + what + " waits: " + step.Reason, Key: "request-wait/" + r.ID + "/" + numberless(step.Reason),
			ReleaseLock: true, Request: note(model.RequestWaiting, step.Reason)}, true
	}
	key := fmt.Sprintf("request/%s/%s/%x", r.ID, step.Kind, step.MemberID)
	if offlineElsewhere(in, step) {
		return Action{Kind: DoNothing, Reason: self + "; " + what + ": " + step.Reason + ": its own agent's step", Key: "request-elsewhere/" + key,
			ReleaseLock: true, Request: note(model.RequestWaiting, step.Reason+": its own agent's step")}, true
	}
	if step.Kind == StepDefragOffline {
		act := defragOfflineStep(in, step, key)
		act.Request = note(model.RequestActing, step.Reason)
		return act, true
	}
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step,
			Request: note(model.RequestActing, step.Reason)}, true
	}
	act := Action{Kind: DoDefrag, Key: key, Step: step, ReleaseLock: true, Reason: step.Reason, Request: note(model.RequestActing, step.Reason)}
	if step.Kind == StepMoveLeader {
		act.Kind, act.Reason = DoChangeMembership, fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)
	}
	return act, true
}

// requestWhat names a request for people.
func requestWhat(r *model.Request) string {
	switch {
	case r.Kind == model.RequestDefrag && r.Member != "":
		return fmt.Sprintf("%s's request (defrag %s)", r.By, r.Member)
	case r.Kind == model.RequestDefrag:
		return fmt.Sprintf("%s's request (defrag)", r.By)
	case r.Kind == model.RequestLeaderMove:
		return fmt.Sprintf("%s's request (leader move to %s)", r.By, r.To)
	}
	return fmt.Sprintf("%s's request (%s)", r.By, r.Kind)
}

// requestDone is every member some agent defragmented for the request.
func requestDone(in Input) map[uint64]bool {
	done := map[uint64]bool{}
	for _, id := range in.Memory.RequestDone {
		done[id] = true
	}
	for _, rec := range in.Agents {
		if rec.Request != nil && rec.Request.ID == in.Request.ID {
			for _, id := range rec.Request.Done {
				done[id] = true
			}
		}
	}
	return done
}

// withRequest says, for a decision that is not the request's own (an
// earlier rule came first: NOSPACE, a membership change, a repair, the
// pause), that the request waits behind it.
func withRequest(in Input, act Action) Action {
	if in.Request == nil {
		act.Request = nil
		return act
	}
	if j := in.Local.OfflineDefrag; j != nil && j.Request == in.Request.ID {
		// This agent's own member is out for the request's offline
		// defragmentation until it has caught up: the request is acting
		// here, whatever the pass decides (start etcd, wait for it).
		act.Request = &model.RequestProgress{ID: in.Request.ID, Phase: model.RequestActing, Text: act.Reason}
		return act
	}
	if act.Request == nil || act.Request.ID != in.Request.ID || (act.Request.Phase == model.RequestActing && act.Kind == DoWait) {
		act.Request = &model.RequestProgress{ID: in.Request.ID, Phase: model.RequestWaiting, Text: act.Reason}
	}
	return act
}
