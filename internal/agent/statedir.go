package agent

import (
	"context"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
)

// noteWrite records how a write of the state dir's file name went and
// returns err. While any of its files cannot be written (a full or
// read-only filesystem, an immutable file), the status, /readyz, the
// STATUS line and etcdkeeper_state_dir_writable say so; the loop goes on
// deciding and acting (only a decision that needs the write waits).
func (a *Agent) noteWrite(name string, err error) error {
	a.mu.Lock()
	if a.writeErrs == nil {
		a.writeErrs = map[string]string{}
	}
	_, was := a.writeErrs[name]
	if err != nil {
		a.writeErrs[name] = err.Error()
	} else {
		delete(a.writeErrs, name)
	}
	var msgs []string
	for _, m := range a.writeErrs {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	a.status.StateDirError = strings.Join(msgs, "; ")
	failing := len(a.writeErrs) > 0
	a.mu.Unlock()
	if failing {
		a.metrics.StateDirWritable.Set(0)
	} else {
		a.metrics.StateDirWritable.Set(1)
	}
	switch {
	case err != nil && !was:
		a.lg.Error("state dir: cannot write "+name, zap.Error(err))
	case err == nil && was:
		a.lg.Info("state dir: " + name + " written again")
	}
	return err
}

// releaseAfterError gives the cluster lock back after a pass that failed:
// the step that wanted it did not finish, and a step that keeps failing
// (a state dir that cannot be written, a call etcd refuses) must not keep
// every other agent from acting. The next pass takes it again if it still
// needs it, and decides again with it held.
func (a *Agent) releaseAfterError(ctx context.Context, act reconcile.Action, err error) {
	if a.lock == nil || act.Kind == reconcile.DoTakeLock {
		return
	}
	a.lg.Warn("giving the cluster lock back: the pass failed", zap.String("action", act.Kind.String()), zap.Error(err))
	a.releaseLock(ctx)
}
