package agent

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// restartDue is why the running etcd must restart to be what the spec
// says (model.Restart): its settings changed.
func (a *Agent) restartDue(s *spec.Spec, self spec.Member) model.Restart {
	var r model.Restart
	if a.settings != "" && a.settings != etcdproc.Settings(s, self) {
		r = r.Also("changed settings")
	}
	return r
}

// restartForRollout stops etcd to start it again as the spec says now
// (the start path starts it as it is); the lock is kept until the member
// is a caught-up healthy voter again.
func (a *Agent) restartForRollout(act reconcile.Action) (string, bool, error) {
	s, self := a.Spec()
	a.lg.Warn("restarting etcd for a rollout", zap.String("why", act.Restart.Why), zap.String("from", a.settings), zap.String("to", etcdproc.Settings(s, self)))
	if _, err := a.etcd.Stop(); err != nil {
		return "rolling restart: stop", false, err
	}
	a.data = nil
	a.restarted = true
	a.remember(history.Event{Kind: "rollout-restart", Reason: act.Reason, Detail: map[string]string{"why": act.Restart.Why, "generation": s.Generation}})
	return act.Reason, true, nil
}

// takeRolloutSnapshot keeps a verified snapshot of the keyspace before
// the rollout's first restart: the repair's safety snapshot, reused — a
// verified scheduled one young enough (repair.snapshotMaxAge) stands for
// it, else one is taken into the snapshot dir.
func (a *Agent) takeRolloutSnapshot(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	s, self := a.Spec()
	key := reconcile.RolloutKey(s.Generation, in.Local.Restart)
	if path, ok := a.recentSnapshot(in.Cluster.ClusterID); ok {
		a.rolloutSnapshot = key
		a.lg.Info("rollout snapshot: a recent verified snapshot stands for it", zap.String("path", path), zap.String("rollout", key))
		a.remember(history.Event{Kind: "rollout-snapshot", Reason: act.Reason, Detail: map[string]string{"path": path, "reused": "true"}})
		return fmt.Sprintf("rollout snapshot: %s (recent, verified)", path), true, nil
	}
	t := backup.Taker{Client: a.client, Cluster: s.Cluster.Name, Member: self.Name, Dir: self.SnapshotDir, By: backup.ByRollout}
	e, err := t.Take(ctx)
	if err != nil {
		return "rollout snapshot failed", false, fmt.Errorf("snapshot before the rollout (%s): %w", in.Local.Restart.Why, err)
	}
	a.rolloutSnapshot = key
	a.lg.Info("rollout snapshot taken", zap.String("path", e.Path()), zap.String("rollout", key))
	a.remember(history.Event{Kind: "rollout-snapshot", Reason: act.Reason, Detail: map[string]string{"path": e.Path()}})
	return fmt.Sprintf("rollout snapshot: %s (verified)", e.Path()), true, nil
}
