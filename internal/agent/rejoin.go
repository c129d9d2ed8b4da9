package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// The rejoin journal's steps, in order. Each is idempotent: a resumed
// rejoin observes the cluster again and skips what is already done.
const (
	stepPrecheck = "precheck"
	stepSnapshot = "snapshot"
	stepRemove   = "remove"
	stepMove     = "move"
	stepAdd      = "add"
	stepStart    = "start"
	stepPromote  = "promote"
	stepDone     = "done"
)

// rejoin is the one path by which a member (re)enters a live cluster: a
// fresh join, a lost data dir, a removed member the spec still lists, and
// corrupt data all go through it. It holds the cluster-wide lock from the
// first change until the member is promoted.
// data is the data dir as inspected in this pass: only this agent changes
// it, so it is not inspected again under the lock (a full check of a large
// db takes a while).
func (a *Agent) rejoin(ctx context.Context, data model.Data) (string, error) {
	if err := a.takeLock(ctx); err != nil {
		if errors.Is(err, cluster.ErrLocked) {
			return "waiting: another agent holds the cluster lock", nil
		}
		return "waiting for the cluster lock", err
	}
	// Decide again under the lock: another agent may have changed the
	// membership since the first look.
	d, view, err := a.decideStart(ctx, data)
	if err != nil {
		return "rejoin: observing under the lock failed", err
	}
	if d.Action != reconcile.ActRejoin || view == nil {
		a.releaseLock(ctx)
		return "waiting: " + d.Reason, nil
	}
	if d.Repair {
		a.setPhase("repairing")
	} else {
		a.setPhase("joining")
	}
	// Tell the other agents, before this host's member appears, that its
	// spec wants it: an agent with an older spec then does not remove it.
	a.publish(ctx)
	j, err := a.openJournal(d)
	if err != nil {
		return "rejoin: journal", err
	}
	steps := []func(context.Context, *repair.Journal, reconcile.StartDecision, *model.Cluster) error{
		a.stepPrecheck, a.stepSnapshot, a.stepRemove, a.stepMove, a.stepAddAndStart,
	}
	for _, step := range steps {
		if err := step(ctx, &j, d, view); err != nil {
			if d.Repair {
				a.metrics.Repairs.WithLabelValues("failed").Inc()
			}
			j.Error = err.Error()
			_ = a.saveJournal(j)
			// Give the lock back: the journal keeps the progress, and the
			// step that failed may need another agent to act first (etcd
			// refuses adds while a voter is down; that voter's own repair
			// needs the lock). The next pass observes and decides again.
			a.releaseLock(ctx)
			return fmt.Sprintf("rejoin: step %s failed", j.Step), err
		}
	}
	return fmt.Sprintf("rejoining: etcd started as member %x, waiting to promote (%s)", j.NewMemberID, d.Reason), nil
}

// openJournal resumes the open journal or starts a new one.
func (a *Agent) openJournal(d reconcile.StartDecision) (repair.Journal, error) {
	j, err := a.loadJournal()
	if err != nil {
		return j, err
	}
	now := time.Now()
	if j.Step != "" && j.Step != stepDone {
		a.lg.Info("rejoin resumed", zap.String("id", j.ID), zap.String("step", j.Step))
		return j, nil
	}
	j = repair.Journal{ID: now.UTC().Format("20060102T150405Z"), Reason: d.Reason, Step: stepPrecheck,
		StartedAt: now, UpdatedAt: now, Attempts: j.Attempts}
	if d.Repair {
		j.Class = "repair"
		j.Attempts = append(j.Attempts, now)
	} else {
		j.Class = "join"
	}
	a.lg.Warn("rejoin started", zap.String("id", j.ID), zap.String("kind", j.Class), zap.String("reason", d.Reason))
	return j, a.saveJournal(j)
}

func (a *Agent) advance(j *repair.Journal, step string, f ...zap.Field) error {
	j.Step = step
	j.UpdatedAt = time.Now()
	j.Error = ""
	if err := a.saveJournal(*j); err != nil {
		return err
	}
	a.lg.Info("rejoin step", append([]zap.Field{zap.String("id", j.ID), zap.String("step", step)}, f...)...)
	return nil
}

// stepPrecheck proves that the data can be moved aside before anything
// changes: a repair that removed the member and then could not move its
// data would stop half-way.
func (a *Agent) stepPrecheck(_ context.Context, _ *repair.Journal, d reconcile.StartDecision, _ *model.Cluster) error {
	if !d.MoveData {
		return nil
	}
	_, self := a.Spec()
	return repair.CheckMoveAside(self.DataDir, self.BackupDir)
}

// stepSnapshot keeps a snapshot of the cluster's keyspace from a healthy
// peer before anything is changed: the last line of defence if the repair
// goes wrong.
func (a *Agent) stepSnapshot(ctx context.Context, j *repair.Journal, d reconcile.StartDecision, v *model.Cluster) error {
	s, self := a.Spec()
	if !d.Repair || j.SnapshotPath != "" || (s.Repair.Snapshot != nil && !*s.Repair.Snapshot) {
		return nil
	}
	src, ok := v.Member(v.LeaderID)
	if !ok || len(src.ClientURLs) == 0 {
		return fmt.Errorf("no leader to take a snapshot from")
	}
	dir := filepath.Join(self.StateDir, "snapshots")
	if err := a.checkFree(dir, src.DBSize, s.Repair.MinFreeMB); err != nil {
		return err
	}
	a.crashPoint(stepSnapshot)
	path := filepath.Join(dir, j.ID+".db")
	n, err := a.client.SaveSnapshot(ctx, src.ClientURLs[0], path)
	if err != nil {
		return err
	}
	j.SnapshotPath = path
	return a.advance(j, stepSnapshot, zap.String("path", path), zap.Int64("bytes", n), zap.String("from", src.Name))
}

// stepRemove removes this host's stale entry: remove before add, since
// etcd refuses adds while a voter is down.
func (a *Agent) stepRemove(ctx context.Context, j *repair.Journal, d reconcile.StartDecision, _ *model.Cluster) error {
	if d.StaleID == 0 {
		return nil
	}
	a.crashPoint(stepRemove)
	if err := a.client.Remove(ctx, d.StaleID); err != nil {
		return err
	}
	a.metrics.MembershipChanges.WithLabelValues("remove").Inc()
	j.OldMemberID = d.StaleID
	return a.advance(j, stepRemove, zap.String("removed", fmt.Sprintf("%x", d.StaleID)))
}

// stepMove moves the unusable data dir aside, on its own filesystem; it is
// kept, never deleted.
func (a *Agent) stepMove(_ context.Context, j *repair.Journal, d reconcile.StartDecision, _ *model.Cluster) error {
	if !d.MoveData {
		return nil
	}
	s, self := a.Spec()
	if err := a.checkFree(self.BackupDir, 0, s.Repair.MinFreeMB); err != nil {
		return err
	}
	a.crashPoint(stepMove)
	dest, err := repair.MoveAside(self.DataDir, self.BackupDir, time.Now())
	if err != nil {
		return err
	}
	if dest != "" {
		j.BackupPath = dest
	}
	a.warnBackups(s.Repair.KeepBackups)
	return a.advance(j, stepMove, zap.String("from", self.DataDir), zap.String("to", dest))
}

// stepAddAndStart adds this host as a learner (or takes over an unstarted
// entry with its peer URLs) and starts etcd to join with the member list
// the cluster returned.
func (a *Agent) stepAddAndStart(ctx context.Context, j *repair.Journal, d reconcile.StartDecision, v *model.Cluster) error {
	_, self := a.Spec()
	id := d.ReuseID
	members := v.Members
	if id == 0 {
		a.crashPoint(stepAdd)
		m, all, err := a.client.AddLearner(ctx, self.PeerURLs)
		if err != nil {
			return err
		}
		id, members = m.ID, all
		a.metrics.MembershipChanges.WithLabelValues("add-learner").Inc()
	}
	j.NewMemberID = id
	if err := a.advance(j, stepAdd, zap.String("member-id", fmt.Sprintf("%x", id)), zap.Bool("reused", d.ReuseID != 0)); err != nil {
		return err
	}
	a.crashPoint(stepStart)
	if err := a.launch(etcdproc.Join(members, id, self.Name)); err != nil {
		return err
	}
	return a.advance(j, stepPromote)
}

// checkFree refuses to go on when the filesystem holding dir would have
// less than minFreeMB left after need more bytes.
func (a *Agent) checkFree(dir string, need int64, minFreeMB int64) error {
	free, err := repair.FreeBytes(dir)
	if err != nil {
		return err
	}
	want := uint64(need) + uint64(minFreeMB)<<20
	if free < want {
		return fmt.Errorf("not enough free space under %s: %d MiB free, need %d MiB (repair.minFreeMB plus the snapshot): free some space; nothing was changed", dir, free>>20, want>>20)
	}
	return nil
}

// warnBackups reports, but never deletes, moved-aside data dirs beyond
// repair.keepBackups: etcdkeeper does not delete data.
func (a *Agent) warnBackups(keep int) {
	_, self := a.Spec()
	list, err := repair.ListBackups(self.BackupDir)
	if err == nil && keep > 0 && len(list) > keep {
		a.lg.Warn("more moved-aside data dirs than repair.keepBackups; etcdkeeper never deletes them: remove old ones by hand once the cluster is healthy",
			zap.Int("count", len(list)), zap.Int("keepBackups", keep), zap.String("dir", self.BackupDir))
	}
}

// crashPoint lets tests kill the agent between two journal steps.
func (a *Agent) crashPoint(step string) {
	if a.cfg.CrashAt == step {
		a.lg.Error("test crash point reached: exiting hard", zap.String("step", step))
		os.Exit(3)
	}
}

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
