package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
)

// reconcileMembership makes at most one membership change toward the
// spec: observe, plan, and only when a change is due take the cluster lock,
// observe and plan again under it, act once, release. It returns "" when
// the membership needs nothing.
func (a *Agent) reconcileMembership(ctx context.Context) (string, error) {
	step, view, err := a.planNow(ctx)
	if err != nil {
		return "", err
	}
	if step.Kind == reconcile.StepNone {
		return "", nil
	}
	if step.Kind == reconcile.StepWait {
		return "waiting: " + step.Reason, nil
	}
	if why := a.specDisagrees(ctx, step, view); why != "" {
		return "waiting: " + why, nil
	}
	if err := a.takeLock(ctx); err != nil {
		if errors.Is(err, cluster.ErrLocked) {
			return "waiting: another agent holds the cluster lock", nil
		}
		return "membership: taking the lock", err
	}
	defer a.releaseLock(ctx)
	// Look again under the lock: the first look may be stale.
	step, view, err = a.planNow(ctx)
	if err != nil {
		return "", err
	}
	if step.Kind == reconcile.StepNone || step.Kind == reconcile.StepWait {
		return "waiting: " + step.Reason, nil
	}
	if err := a.act(ctx, step, view); err != nil {
		return fmt.Sprintf("membership change %s of %s failed", step.Kind, step.Name), err
	}
	return fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason), nil
}

// planNow observes the cluster and asks reconcile.Plan.
func (a *Agent) planNow(ctx context.Context) (reconcile.Step, model.Cluster, error) {
	s, _ := a.Spec()
	view, err := a.client.Observe(ctx)
	if err != nil {
		return reconcile.Step{}, view, fmt.Errorf("observe cluster: %w", err)
	}
	a.noteView(view)
	obs := a.observed(view)
	return reconcile.Plan(s.Members, obs, reconcile.Options{LearnerTimeout: s.Agent.LearnerTimeout.Duration}), view, nil
}

// observed turns the view into Plan's input, remembering since when each
// learner or unstarted member has been pending.
func (a *Agent) observed(v model.Cluster) model.Cluster {
	if a.pendingSince == nil {
		a.pendingSince = model.Pending{}
	}
	a.pendingSince.Stamp(&v)
	return v
}

// specDisagrees holds back the removal of a member while a live agent
// runs a spec that still lists it: the spec file reaches hosts at
// different times, and removing a member some host still wants would make
// the two fight.
func (a *Agent) specDisagrees(ctx context.Context, step reconcile.Step, _ model.Cluster) string {
	if step.Kind != reconcile.StepRemove || step.Name == "" {
		return ""
	}
	s, _ := a.Spec()
	if _, listed := s.Lookup(step.Name); listed {
		return "" // a stale learner of a spec member: every spec agrees it may go
	}
	recs, err := a.client.Agents(ctx, s.Cluster.Name)
	if err != nil {
		return "cannot read the agents' specs: " + err.Error()
	}
	for _, r := range recs {
		if r.Generation != s.Generation && slices.Contains(r.Members, step.Name) {
			return fmt.Sprintf("not removing %s yet: agent %s runs spec generation %s, which still lists it (mine is %s)", step.Name, r.Name, r.Generation, s.Generation)
		}
	}
	return ""
}

// act carries out one membership change.
func (a *Agent) act(ctx context.Context, step reconcile.Step, view model.Cluster) error {
	voters, healthy := view.Voters(0)
	fields := []zap.Field{zap.Stringer("kind", step.Kind), zap.String("target", step.Name),
		zap.String("target-id", fmt.Sprintf("%x", step.MemberID)), zap.String("reason", step.Reason),
		zap.Int("healthy-voters", healthy), zap.Int("voters", voters)}
	var err error
	switch step.Kind {
	case reconcile.StepRemove:
		err = a.client.Remove(ctx, step.MemberID)
	case reconcile.StepUpdatePeerURLs:
		err = a.client.UpdatePeerURLs(ctx, step.MemberID, step.PeerURLs)
		fields = append(fields, zap.Strings("peer-urls", step.PeerURLs))
	case reconcile.StepMoveLeader:
		leader, ok := view.Member(step.MemberID)
		if !ok || len(leader.ClientURLs) == 0 {
			return fmt.Errorf("leader %x has no client URL", step.MemberID)
		}
		err = a.client.MoveLeader(ctx, leader.ClientURLs[0], step.To)
		fields = append(fields, zap.String("to", fmt.Sprintf("%x", step.To)))
	default:
		return fmt.Errorf("unknown step %s", step.Kind)
	}
	if err != nil {
		return err
	}
	a.lg.Warn("membership change", fields...)
	a.metrics.MembershipChanges.WithLabelValues(step.Kind.String()).Inc()
	return nil
}

// publish keeps this agent's record in the cluster current.
func (a *Agent) publish(ctx context.Context) {
	s, self := a.Spec()
	if a.presence != nil && !a.presence.Alive() {
		_ = a.presence.Close()
		a.presence = nil
	}
	if a.presence == nil {
		p, err := a.client.NewPresence(ctx)
		if err != nil {
			return
		}
		a.presence = p
	}
	st := a.Status()
	rec := model.AgentRecord{Name: self.Name, Generation: s.Generation, Members: s.Names(), Phase: st.Phase, Addr: self.AgentAddr}
	if err := a.presence.Publish(ctx, s.Cluster.Name, rec); err != nil {
		a.lg.Debug("publish agent record", zap.Error(err))
	}
}
