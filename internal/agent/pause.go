package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
)

// observePause reads the operator's pause (etcdkeeper pause) for the
// decision: the cluster's key whenever the cluster answers with a leader
// this pass, and otherwise the pause last read there — a pause is not
// lifted by the quorum going away, only by resume or its end.
func (a *Agent) observePause(ctx context.Context, in *reconcile.Input) {
	in.Now = time.Now()
	if in.Cluster != nil || (in.Local.Answer != nil && in.Local.Answer.Leader != 0) {
		s, _ := a.Spec()
		if p, err := a.client.GetPause(ctx, s.Cluster.Name); err != nil {
			a.lg.Debug("reading the pause", zap.Error(err))
		} else {
			a.pause = p
		}
	}
	in.Pause = a.pause
	if on := in.Pause.InForce(in.Now); on != a.paused {
		a.paused = on
		if on {
			a.lg.Info("paused", zap.String("by", in.Pause.By), zap.String("reason", in.Pause.Reason), zap.Time("until", in.Pause.Until))
		} else {
			a.lg.Info("pause over: the agent acts again")
		}
	}
}
