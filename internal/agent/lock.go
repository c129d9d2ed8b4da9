package agent

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// takeLock takes the cluster-wide lock (one actor at a time), or keeps
// the one this agent holds while its lease is alive.
func (a *Agent) takeLock(ctx context.Context) error {
	if a.lock != nil && a.lock.Held() {
		return nil
	}
	s, _ := a.Spec()
	l, err := a.client.TryLock(ctx, s.Cluster.Name)
	if err != nil {
		return err
	}
	a.lock = l
	a.lockSince = time.Now()
	a.lg.Info("cluster lock taken")
	return nil
}

func (a *Agent) releaseLock(ctx context.Context) {
	if a.lock == nil {
		return
	}
	if err := a.lock.Unlock(ctx); err != nil {
		a.lg.Warn("release cluster lock", zap.Error(err))
	} else {
		a.lg.Info("cluster lock released")
	}
	a.lock = nil
}
