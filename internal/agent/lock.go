package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
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
	// A restart taken without the lock (a quota raise under NOSPACE) has
	// no lock to keep: its mark must not hold a lock taken later
	// (reconcile.restartedCatchingUp).
	if a.lock == nil {
		a.restarted = false
		return
	}
	if err := a.lock.Unlock(ctx); err != nil {
		a.lg.Warn("release cluster lock", zap.Error(err))
	} else {
		a.lg.Info("cluster lock released")
	}
	a.lock = nil
	a.restarted = false
}

// fenceLock proves that the cluster lock is still this agent's right
// before a locked step (cluster.Lock.Fence) and returns the context to
// take the step with: it expires before the lock could. A lock that is
// not provably ours is given up: it must not be kept alive either. A
// rejoin fences each of its membership changes itself (its snapshot may
// take longer than one call).
func (a *Agent) fenceLock(ctx context.Context, act reconcile.Action) (context.Context, context.CancelFunc, error) {
	if a.lock == nil {
		return ctx, func() {}, cluster.ErrLockLost
	}
	fenced, cancel, err := a.lock.Fence(ctx)
	if err != nil {
		a.lg.Warn("cluster lock not provably ours: giving it up", zap.Error(err))
		a.releaseLock(ctx)
		return ctx, cancel, err
	}
	if act.Kind == reconcile.DoRejoin || act.Kind == reconcile.DoDefrag || act.Kind == reconcile.DoRolloutSnapshot {
		// A defragmentation (a snapshot) takes longer than one call; it changes no
		// membership, the lock only keeps it one member at a time, and
		// the lease is kept alive meanwhile (lockKept checks it after).
		cancel()
		return ctx, func() {}, nil
	}
	return fenced, cancel, nil
}

// lockKept says loudly when the lock's lease ran out while a locked step
// ran: another agent may have acted at the same time. A rejoin checks
// around each of its membership changes itself.
func (a *Agent) lockKept(ctx context.Context, act reconcile.Action) {
	if a.lock == nil || act.Kind == reconcile.DoRejoin {
		return
	}
	switch kept, err := a.lock.Kept(ctx); {
	case err == nil && !kept:
		a.lg.Error("the cluster lock was lost while a locked step ran: another agent may have changed the membership at the same time; check the member list",
			zap.Stringer("step", act.Kind), zap.Error(err))
	case err != nil:
		a.lg.Warn("could not confirm the cluster lock after a locked step", zap.Stringer("step", act.Kind), zap.Error(err))
	}
}
