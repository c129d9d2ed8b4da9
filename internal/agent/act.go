package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// act takes the one step the decision asked for. It returns what was
// done, whether the next pass should follow at once, and an error.
func (a *Agent) act(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	said, again, err := a.step(ctx, act, in)
	if act.ReleaseLock {
		a.releaseLock(ctx)
	} else if a.lock != nil && act.Kind != reconcile.DoRejoin && act.Kind != reconcile.DoTakeLock && time.Since(a.lockSince) > a.maxLockHold() {
		// A step that took the lock and never finished (a restarted etcd
		// that crash-loops, a member that stays silent) must not keep
		// every other agent from acting.
		a.lg.Warn("giving the cluster lock back: held too long without finishing", zap.Duration("held", time.Since(a.lockSince).Round(time.Second)))
		a.releaseLock(ctx)
		a.lockReturned = time.Now()
	}
	a.setPhase(phaseOf(act, in))
	return said, again, err
}

func (a *Agent) step(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	if act.NeedsLock() && !act.Unlocked {
		// The decision saw the lock held; its lease may have expired since
		// (a long pass, a partition, a pause): another agent may hold it
		// now. Asked of the cluster, not of our client's belief.
		fenced, cancel, err := a.fenceLock(ctx, act)
		defer cancel()
		if err != nil {
			return "the cluster lock was lost before the step", false, fmt.Errorf("not acting: %w", err)
		}
		defer a.lockKept(ctx, act)
		ctx = fenced
	}
	if do, ok := a.steps()[act.Kind]; ok {
		return do(ctx, act, in)
	}
	return act.Reason, false, nil
}

// stepFunc takes one kind of step: what it did, whether the next pass
// should follow at once, and an error.
type stepFunc func(context.Context, reconcile.Action, reconcile.Input) (string, bool, error)

// steps is the one step of each kind of action (DoNothing and DoWait
// have none).
func (a *Agent) steps() map[reconcile.ActionKind]stepFunc {
	recovery := func(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
		return a.recoverStep(ctx, act)
	}
	return map[reconcile.ActionKind]stepFunc{
		reconcile.DoStart: a.startStep,
		reconcile.DoIdle: func(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.idle(act)
		},
		reconcile.DoTakeLock: func(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.takeLockFor(ctx, act)
		},
		reconcile.DoRejoin: a.rejoin,
		reconcile.DoPromote: func(ctx context.Context, _ reconcile.Action, in reconcile.Input) (string, bool, error) {
			return a.promote(ctx, in.Local.Answer.MemberID)
		},
		reconcile.DoFinishRejoin: func(_ context.Context, _ reconcile.Action, in reconcile.Input) (string, bool, error) {
			return a.finishRejoin(in.Local.Answer.MemberID)
		},
		reconcile.DoStopForRepair: a.stopForRepair,
		reconcile.DoStopStuck:     a.stopStuck,
		reconcile.DoRestart:       a.restart,
		reconcile.DoFinishUpgrade: func(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.finishUpgrade(act)
		},
		reconcile.DoRolloutSnapshot: a.takeRolloutSnapshot,
		reconcile.DoDowngrade: func(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.downgrade(ctx, act)
		},
		reconcile.DoRestartStalled: func(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.restartStalled(act.Reason)
		},
		reconcile.DoChangeMembership: func(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
			return a.changeMembership(ctx, act.Step, in)
		},
		reconcile.DoPlaceLeader: a.placeLeader,
		reconcile.DoDisarm:      a.disarmStep,
		reconcile.DoCompact: func(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
			return a.compact(ctx, act)
		},
		reconcile.DoDefrag:          a.defragStep,
		reconcile.DoDefragOffline:   a.defragOffline,
		reconcile.DoResumeOffline:   a.resumeDefragOffline,
		reconcile.DoEndOffline:      a.endDefragOffline,
		reconcile.DoTakeTurn:        a.takeTurn,
		reconcile.DoStopForTurn:     a.stopForTurn,
		reconcile.DoEndTurn:         a.endTurn,
		reconcile.DoReleaseTurn:     a.releaseTurn,
		reconcile.DoStopForRecovery: recovery, reconcile.DoForceNewCluster: recovery, reconcile.DoRestoreSnapshot: recovery,
		reconcile.DoFinishRecovery: recovery, reconcile.DoRefuseRecovery: recovery, reconcile.DoAcceptFence: recovery, reconcile.DoEndFence: recovery,
	}
}

// startStep starts etcd: as it is, or forming a new cluster.
func (a *Agent) startStep(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
	b := etcdproc.AsIs()
	if act.Start.Action == reconcile.ActStartNew {
		s, _ := a.Spec()
		b = etcdproc.NewCluster(s)
	}
	if err := a.launch(b); err != nil {
		return "starting etcd failed", false, err
	}
	return act.Reason, true, nil
}

// stopForRepair records etcd's verdict, then stops etcd: the start path
// repairs the member.
func (a *Agent) stopForRepair(_ context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	if err := a.saveSuspect(suspect{MemberID: in.Local.Answer.MemberID, Reason: act.Reason}); err != nil {
		return "recording the corruption before stopping etcd", false, err
	}
	return a.stop(act.Reason, &repair.Verdict{Class: repair.ClassCorrupt, Reason: act.Reason, Evidence: act.Reason})
}

// stopStuck stops a stuck etcd: a stopped process by SIGKILL at once.
func (a *Agent) stopStuck(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
	a.silentSince = time.Time{}
	if act.Kill {
		return a.kill(act.Reason)
	}
	return a.stop(act.Reason, nil)
}

// restart is the rolling restart's step: etcd alone, or the agent onto a
// new binary with it.
func (a *Agent) restart(_ context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	if act.Restart.Agent {
		return a.restartOntoBinary(act, in)
	}
	return a.restartForRollout(act)
}

// disarmStep is the NOSPACE procedure's disarm (with its put), or the
// disarm of alarms that serve no purpose.
func (a *Agent) disarmStep(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
	if act.Step.Kind == reconcile.StepDisarm {
		return a.disarmNoSpace(ctx, act)
	}
	return a.disarm(ctx, act)
}

// defragStep defragments the member the step names, remembering it for
// the operator's request it serves, if any.
func (a *Agent) defragStep(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	said, again, err := a.defrag(ctx, act.Step, in)
	if err == nil && act.Request != nil {
		a.requestDone = append(a.requestDone, act.Step.MemberID)
	}
	return said, again, err
}

// maxLockHold is how long the lock may stay with this agent while its
// step does not finish: agent.learnerTimeout.
func (a *Agent) maxLockHold() time.Duration {
	s, _ := a.Spec()
	return s.Agent.LearnerTimeout.Duration
}

// phaseOf is the phase the agent reports after act.
func phaseOf(act reconcile.Action, in reconcile.Input) model.Phase {
	l := in.Local
	switch {
	case l.Recovery.Open() && !(l.Running && l.Answer != nil && l.Answer.Leader != 0):
		return model.PhaseRecovering
	case act.Kind == reconcile.DoIdle:
		return model.PhaseIdle
	case act.Kind == reconcile.DoRejoin && act.Start.Repair:
		return model.PhaseRepairing
	case act.Kind == reconcile.DoRejoin:
		return model.PhaseJoining
	case act.Kind == reconcile.DoStart || (l.Running && l.Answer == nil):
		return model.PhaseStarting
	case l.Running && l.Answer.IsLearner:
		return model.PhasePromoting
	case l.Running && l.Answer.Leader != 0:
		return model.PhaseRunning
	}
	return model.PhaseWaiting
}

// launch starts etcd with flags from the spec.
func (a *Agent) launch(b etcdproc.Bootstrap) error {
	s, self := a.Spec()
	bin, err := a.checkBinary(s)
	if err != nil {
		return err
	}
	// What etcd reads at start is fingerprinted before it starts: a CA
	// file changed after is a settings change (a restart), never missed.
	settings, trust := etcdproc.Settings(s, self), trustedBy(etcdTrustFiles(self.TLS))
	p, err := a.etcd.Start(etcdproc.CommandFor(s, self, b, a.cfg.Self, a.cfg.Env), self.DataDir)
	if err != nil {
		return err
	}
	a.binary = &bin
	a.data = nil
	a.settling = true
	a.updateStatus(func(st *Status) { st.MemberID, st.Healthy = "", false })
	a.settings = settings
	a.mu.Lock()
	a.etcdTrust = trust
	a.mu.Unlock()
	a.lg.Info("etcd started", zap.Int("pid", p.PID()), zap.Stringer("bootstrap", b))
	a.updateStatus(func(st *Status) { st.EtcdPID = p.PID() })
	return nil
}

// idle keeps the member stopped; a data dir whose member the cluster
// removed is moved aside (kept) so that a later join starts clean.
func (a *Agent) idle(act reconcile.Action) (string, bool, error) {
	if !act.Start.MoveData {
		return act.Reason, false, nil
	}
	_, self := a.Spec()
	dest, err := repair.MoveAside(self.DataDir, self.BackupDir, time.Now())
	a.data = nil
	if err != nil {
		return "idle: moving the removed member's data aside failed", false, err
	}
	a.clearSuspect()
	if dest != "" {
		a.lg.Warn("moved the removed member's data dir aside", zap.String("from", self.DataDir), zap.String("to", dest))
	}
	return act.Reason, false, nil
}

// takeLockFor takes the cluster lock; the next pass, which holds it,
// observes and decides again: the first look may be stale.
func (a *Agent) takeLockFor(ctx context.Context, act reconcile.Action) (string, bool, error) {
	if err := a.takeLock(ctx); err != nil {
		if errors.Is(err, cluster.ErrLocked) {
			return "waiting: another agent holds the cluster lock", false, nil
		}
		return "waiting for the cluster lock", false, err
	}
	return act.Reason, true, nil
}

// promote asks the cluster to promote the local learner; etcd refuses
// until the learner has caught up with the leader's log.
func (a *Agent) promote(ctx context.Context, id uint64) (string, bool, error) {
	err := a.client.Promote(ctx, id)
	if cluster.IsLearnerNotReady(err) {
		a.lockNotForever(ctx)
		return fmt.Sprintf("waiting: learner %x is catching up with the leader", id), false, nil
	}
	if err != nil {
		return fmt.Sprintf("promote of learner %x failed", id), false, err
	}
	a.lockReturned = time.Time{}
	a.lg.Info("promoted to voter", zap.String("member-id", fmt.Sprintf("%x", id)))
	a.metrics.MembershipChanges.WithLabelValues("promote").Inc()
	a.remember(history.Event{Kind: "promote", MemberID: history.HexID(id), Reason: "the learner caught up with the leader"})
	return fmt.Sprintf("promoted: learner %x is now a voter", id), true, nil
}

// lockNotForever gives the cluster lock back when this member has held it
// for longer than agent.learnerTimeout without being promoted: the other
// agents may need it (and may remove this learner as stale).
func (a *Agent) lockNotForever(ctx context.Context) {
	s, _ := a.Spec()
	if a.lock != nil && time.Since(a.lockSince) > s.Agent.LearnerTimeout.Duration {
		a.lg.Warn("giving the cluster lock back: still a learner after agent.learnerTimeout")
		a.releaseLock(ctx)
		a.lockReturned = time.Now()
	}
}

// finishRejoin closes the open rejoin journal once the member is a
// healthy voter (the decision releases the lock).
func (a *Agent) finishRejoin(id uint64) (string, bool, error) {
	j, closed, err := a.rejoiner().Finish(id)
	if err != nil {
		return "closing the rejoin journal", false, err
	}
	if closed && j.NewMemberID != id {
		// The member runs as another ID than the rejoin added (it was
		// started as it was before the rejoin got that far): the rejoin
		// was abandoned, not done.
		a.lg.Warn("rejoin abandoned: the member runs as it was", zap.String("id", j.ID),
			zap.String("member-id", fmt.Sprintf("%x", id)), zap.String("added", fmt.Sprintf("%x", j.NewMemberID)))
		a.remember(rejoinEvent("rejoin-abandoned", id, j))
		return fmt.Sprintf("rejoin abandoned: member %x runs as it was", id), true, nil
	}
	if closed && j.Class == "repair" {
		a.metrics.Repairs.WithLabelValues("done").Inc()
	}
	if closed {
		a.remember(rejoinEvent(j.Class+"-done", id, j))
	}
	a.updateStatus(func(s *Status) { s.RejoinStep = string(j.Step) })
	return fmt.Sprintf("rejoin finished: member %x is a healthy voter", id), true, nil
}

// stop stops the running etcd; the start path then inspects the data dir
// and decides again. With a verdict (corruption etcd reported), it
// starts over at once; without, the exit is classified and the restart
// backoff applies.
func (a *Agent) stop(why string, v *repair.Verdict) (string, bool, error) {
	a.lg.Error("stopping etcd", zap.String("reason", why))
	e, err := a.etcd.Stop()
	if err != nil {
		return "stopping etcd", false, err
	}
	if v == nil {
		a.noteExit(e.String(), e.Uptime, exitVerdict(e), false)
		return why, false, nil
	}
	a.noteExit(e.String(), e.Uptime, *v, true)
	return why, true, nil
}

// changeMembership carries out one membership change.
func (a *Agent) changeMembership(ctx context.Context, step reconcile.Step, in reconcile.Input) (string, bool, error) {
	view := in.View()
	voters, healthy := view.Voters, view.Serving
	fields := []zap.Field{zap.Stringer("kind", step.Kind), zap.String("target", step.Name),
		zap.String("target-id", fmt.Sprintf("%x", step.MemberID)), zap.String("reason", step.Reason),
		zap.Int("healthy-voters", healthy), zap.Int("voters", voters)}
	var err error
	switch step.Kind {
	case reconcile.StepRemove:
		err = a.client.Remove(ctx, in.Cluster.ClusterID, step.MemberID)
	case reconcile.StepUpdatePeerURLs:
		err = a.client.UpdatePeerURLs(ctx, step.MemberID, step.PeerURLs)
		fields = append(fields, zap.Strings("peer-urls", step.PeerURLs))
	case reconcile.StepMoveLeader:
		leader, ok := in.Cluster.Member(step.MemberID)
		if !ok || len(leader.ClientURLs) == 0 {
			return "membership change failed", false, fmt.Errorf("leader %x has no client URL", step.MemberID)
		}
		err = a.client.MoveLeader(ctx, leader.ClientURLs[0], step.To)
		fields = append(fields, zap.String("to", fmt.Sprintf("%x", step.To)))
	default:
		err = fmt.Errorf("unknown step %s", step.Kind)
	}
	if err != nil {
		return fmt.Sprintf("membership change %s of %s failed", step.Kind, step.Name), false, err
	}
	a.lg.Warn("membership change", fields...)
	a.metrics.MembershipChanges.WithLabelValues(step.Kind.String()).Inc()
	if step.Kind == reconcile.StepMoveLeader {
		a.noteLeaderMoved(context.WithoutCancel(ctx), step)
	}
	a.remember(stepEvent(step))
	return fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason), true, nil
}

// noteLeaderMoved records a leader move in the cluster: the placement
// moves nothing for model.LeaderMoveQuiet after any (a hand-off, an
// operator's request, its own), so no two rules bounce leadership.
func (a *Agent) noteLeaderMoved(ctx context.Context, step reconcile.Step) {
	s, self := a.Spec()
	m := model.LeaderMoved{By: self.Name, From: step.MemberID, To: step.To, Why: step.Reason, At: time.Now().UTC()}
	if err := a.client.PutLeaderMoved(ctx, s.Cluster.Name, m); err != nil {
		a.lg.Warn("the leader move is not recorded: the leader placement may move again before 10 minutes", zap.Error(err))
	}
}

// placeLeader moves leadership for its placement (a slow disk, the
// spec's leader tags); like every leader move of the agents, it is
// recorded in the cluster (noteLeaderMoved).
func (a *Agent) placeLeader(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	did, again, err := a.changeMembership(ctx, act.Step, in)
	if err != nil {
		return did, again, err
	}
	a.metrics.Disk.LeaderPlacing.WithLabelValues(act.Placement).Inc()
	return did, again, nil
}

// crashPoint lets tests kill the agent right before a rejoin step's side
// effect.
func (a *Agent) crashPoint(step repair.Step) {
	if a.cfg.CrashAt == string(step) {
		a.lg.Error("test crash point reached: exiting hard", zap.String("step", string(step)))
		os.Exit(3)
	}
}

// disarm clears alarms that no longer serve a purpose: the CORRUPT alarm
// of a member that was removed (repaired under a new ID), or of this
// host's member whose data is about to be moved aside.
func (a *Agent) disarm(ctx context.Context, act reconcile.Action) (string, bool, error) {
	for _, al := range act.Alarms {
		if err := a.client.Disarm(ctx, al); err != nil {
			return "disarming an alarm failed", false, err
		}
		a.lg.Warn("alarm disarmed", zap.String("alarm", al.Type), zap.String("member-id", fmt.Sprintf("%x", al.MemberID)), zap.String("reason", act.Reason))
		a.metrics.AlarmsDisarmed.WithLabelValues(al.Type).Inc()
		a.remember(history.Event{Kind: "alarm-disarmed", MemberID: history.HexID(al.MemberID), Reason: act.Reason, Detail: map[string]string{"alarm": al.Type}})
	}
	return act.Reason, true, nil
}
