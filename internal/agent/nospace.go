package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
)

// compact is the NOSPACE procedure's first step: the cluster's history
// compacted to the current revision. A revision compacted already (this
// step taken again after a crash, or by a new leader's agent) is done.
func (a *Agent) compact(ctx context.Context, act reconcile.Action) (string, bool, error) {
	rev := act.Step.Revision
	start := time.Now()
	a.crashPoint("nospace-compact")
	// A physical compaction answers when done: about a minute per million
	// revisions, longer than the loop's patience with one pass.
	stop := a.feedWithin(start, cluster.CompactDeadline)
	already, err := a.client.Compact(ctx, rev)
	stop()
	if err != nil {
		a.metrics.Space.NoSpaceSteps.WithLabelValues("failed").Inc()
		return fmt.Sprintf("compaction to revision %d failed", rev), false, err
	}
	a.compacted = rev
	if already {
		a.lg.Info("NOSPACE: revision compacted already", zap.Int64("revision", rev))
		return fmt.Sprintf("NOSPACE: revision %d is compacted already", rev), true, nil
	}
	took := time.Since(start).Round(time.Millisecond)
	a.metrics.Space.NoSpaceSteps.WithLabelValues("compact").Inc()
	a.remember(history.Event{Kind: "nospace-compacted", Reason: act.Reason, Detail: map[string]string{"revision": fmt.Sprint(rev), "took": took.String()}})
	a.lg.Warn("NOSPACE: compacted", zap.Int64("revision", rev), zap.Duration("took", took))
	return fmt.Sprintf("NOSPACE: compacted to revision %d in %s", rev, took), true, nil
}

// disarmNoSpace is the procedure's last step: the NOSPACE alarms disarmed
// (one that is gone already is success), then a put, which proves that the
// cluster takes writes again. A put refused again (a db that filled up
// meanwhile) leaves the alarm to the next pass, which observes it again.
func (a *Agent) disarmNoSpace(ctx context.Context, act reconcile.Action) (string, bool, error) {
	a.crashPoint("nospace-disarm")
	if _, _, err := a.disarm(ctx, act); err != nil {
		a.metrics.Space.NoSpaceSteps.WithLabelValues("failed").Inc()
		return "NOSPACE: disarming failed", false, err
	}
	a.metrics.Space.NoSpaceSteps.WithLabelValues("disarm").Inc()
	s, self := a.Spec()
	err := a.client.CheckPut(ctx, cluster.NoSpaceCheckKey(s.Cluster.Name), fmt.Sprintf("%s %s", self.Name, time.Now().UTC().Format(time.RFC3339)))
	if err != nil {
		a.lg.Error("NOSPACE disarmed, but a put was refused", zap.Error(err))
		return "NOSPACE: disarmed, but a put was refused", false, err
	}
	a.remember(history.Event{Kind: "nospace-disarmed", Reason: act.Reason})
	a.lg.Warn("NOSPACE: disarmed, the cluster takes writes again", zap.String("reason", act.Reason))
	return "NOSPACE: disarmed; a put succeeded", true, nil
}

// noSpaceState is what the agent last said of NOSPACE: once per change.
type noSpaceState struct {
	raised bool
	since  time.Time // when raised was first seen
	full   string    // the refusal's reason while the data fills the quota
}

// noteNoSpace reports the NOSPACE state after a pass: in STATUS,
// /status, the metric and the history, and one log line per change (the
// decision says the rest, also once per change).
func (a *Agent) noteNoSpace(in reconcile.Input, act reconcile.Action) {
	raised, known := reconcile.NoSpaceSeen(in.Cluster, in.Local.Answer, a.noSpace.raised)
	if !known {
		return
	}
	full := ""
	if act.Step.Kind == reconcile.StepFull {
		full = act.Step.Reason
	}
	said := ""
	if act.Topic == reconcile.TopicNoSpace {
		said = act.Reason
	}
	a.updateStatus(func(s *Status) { s.NoSpace, s.NoSpaceFull = said, full })
	leads := in.Local.Answer != nil && in.Local.Answer.Leader == in.Local.Answer.MemberID
	switch {
	case raised && !a.noSpace.raised:
		a.lg.Warn("NOSPACE raised: the cluster refuses writes; the agents compact, defragment and disarm", zap.Bool("leader", leads))
		if leads {
			a.remember(history.Event{Kind: "nospace-raised", Reason: "etcd raised NOSPACE (or a db file reached its quota)"})
		}
	case !raised && a.noSpace.raised:
		a.lg.Info("NOSPACE cleared")
		// What the procedure measured and compacted was this NOSPACE's.
		a.defragmented, a.compacted = nil, 0
	}
	switch {
	case full != "" && a.noSpace.full == "":
		a.lg.Error("NOSPACE stays raised: the data fills the quota", zap.String("reason", full))
		a.metrics.Space.NoSpaceSteps.WithLabelValues("refused").Inc()
		if leads {
			a.remember(history.Event{Kind: "nospace-refused", Reason: full})
		}
	case full == "" && a.noSpace.full != "" && raised:
		msg := "NOSPACE: the procedure goes on"
		if act.QuotaRaise {
			msg = "NOSPACE: the spec raises the quota; the members restart with it"
		}
		a.lg.Info(msg, zap.String("decision", act.Reason))
	}
	if full != "" {
		a.metrics.Space.NoSpaceFull.Set(1)
	} else {
		a.metrics.Space.NoSpaceFull.Set(0)
	}
	since := a.noSpace.since
	if raised && !a.noSpace.raised {
		since = time.Now()
	}
	a.noSpace = noSpaceState{raised: raised, since: since, full: full}
}
