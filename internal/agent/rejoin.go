package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// rejoin runs the one path by which a member (re)enters a live cluster: a
// fresh join, a lost data dir, a removed member the spec still lists, and
// corrupt data all go through it. The pass that decided it holds the
// cluster lock, which stays held until the member is promoted (or the
// rejoin fails: repair.Rejoin gives it back then).
func (a *Agent) rejoin(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	_, self := a.Spec()
	d := act.Start
	// Tell the other agents, before this host's member appears, that its
	// spec wants it: an agent with an older spec then does not remove it.
	a.publish(ctx)
	p := repair.Plan{ClusterID: in.Cluster.ClusterID, Reason: d.Reason, Repair: d.Repair, MoveData: d.MoveData, StaleID: d.StaleID, ReuseID: d.ReuseID,
		PeerURLs: self.PeerURLs, Members: in.Cluster.Members}
	p.Leader, _ = in.Cluster.Member(in.Cluster.LeaderID)
	j, err := a.rejoiner().Run(ctx, p)
	a.data = nil
	if err != nil {
		if d.Repair {
			a.metrics.Repairs.WithLabelValues("failed").Inc()
			a.rememberRejoinError(d.Reason, j, err)
		}
		return "rejoin failed", false, err
	}
	return fmt.Sprintf("rejoining: etcd started as member %x, waiting to promote (%s)", j.NewMemberID, d.Reason), true, nil
}

// rememberRejoinError records a repair's failed step in the history. The
// journal stays open (repair.Rejoin.Run), so the next pass resumes at that
// step: it is a "repair-retry", not the end of the repair. The same step
// failing the same way pass after pass is recorded once, not every 5 s;
// a new step, a new error or a new repair is recorded again.
func (a *Agent) rememberRejoinError(reason string, j repair.Journal, err error) {
	step := string(j.Step.Next())
	key := j.ID + "\x00" + step + "\x00" + err.Error()
	if key == a.lastRejoinError {
		return
	}
	a.lastRejoinError = key
	a.remember(history.Event{Kind: "repair-retry", Reason: reason,
		Detail: map[string]string{"rejoin": j.ID, "step": step, "error": err.Error()}})
}

// rejoiner is the rejoin path wired to this agent's cluster client, host,
// journal and lock.
func (a *Agent) rejoiner() *repair.Rejoin {
	s, self := a.Spec()
	return &repair.Rejoin{
		Cluster: watchedCluster{a.client, a}, Host: agentHost{a}, Journals: agentHost{a}, Lock: agentHost{a}, Log: a.lg,
		SnapshotDir: filepath.Join(self.StateDir, "snapshots"), Snapshot: s.Repair.Snapshot == nil || *s.Repair.Snapshot,
		BackupDir: self.BackupDir,
		Reuse:     a.recentSnapshot,
		Changed: func(kind string, id uint64, j repair.Journal) {
			a.metrics.MembershipChanges.WithLabelValues(kind).Inc()
			a.remember(history.Event{Kind: kind, MemberID: history.HexID(id), Reason: j.Reason, Detail: map[string]string{"rejoin": j.ID}})
		},
		CrashAt: a.crashPoint,
	}
}

// agentHost is the agent's side of a rejoin: its data dir, its etcd, its
// journal file and its hold on the cluster lock.
type agentHost struct{ a *Agent }

func (h agentHost) CheckMoveAside() error {
	_, self := h.a.Spec()
	return repair.CheckMoveAside(self.DataDir, self.BackupDir)
}

func (h agentHost) MoveAside() (string, error) {
	s, self := h.a.Spec()
	dest, err := repair.MoveAside(self.DataDir, self.BackupDir, time.Now())
	if err != nil {
		return "", err
	}
	h.a.clearSuspect()
	h.a.warnBackups(s.Repair.KeepBackups)
	return dest, nil
}

// CheckFree refuses to go on when the filesystem holding dir would have
// less than repair.minFreeMB left after need more bytes.
func (h agentHost) CheckFree(dir string, need int64) error {
	s, _ := h.a.Spec()
	free, err := repair.FreeBytes(dir)
	if err != nil {
		return err
	}
	want := uint64(need) + uint64(s.Repair.MinFreeMB)<<20
	if free < want {
		return fmt.Errorf("not enough free space under %s: %d MiB free, need %d MiB (repair.minFreeMB plus the snapshot): free some space; nothing was changed", dir, free>>20, want>>20)
	}
	return nil
}

func (h agentHost) StartJoin(members []model.Member, id uint64) error {
	_, self := h.a.Spec()
	return h.a.launch(etcdproc.Join(members, id, self.Name))
}

func (h agentHost) Load() (repair.Journal, error) { return h.a.loadJournal() }
func (h agentHost) Save(j repair.Journal) error   { return h.a.saveJournal(j) }
func (h agentHost) Release(ctx context.Context)   { h.a.releaseLock(ctx) }
func (h agentHost) Fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if h.a.lock == nil {
		return ctx, func() {}, cluster.ErrLockLost
	}
	return h.a.lock.Fence(ctx)
}

func (h agentHost) Kept(ctx context.Context) (bool, error) {
	if h.a.lock == nil {
		return false, nil
	}
	return h.a.lock.Kept(ctx)
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

// watchedCluster keeps the watchdog fed while a safety snapshot arrives.
type watchedCluster struct {
	*cluster.Client
	a *Agent
}

// SaveSnapshot takes the repair's safety snapshot: encrypted as it
// streams when the spec gives recipients, like every scheduled one (a
// plaintext copy of the keyspace would be the one file that is not).
func (w watchedCluster) SaveSnapshot(ctx context.Context, endpoint, path string) (int64, error) {
	stop := w.a.notify.While(func() int64 { return dirBytes(filepath.Dir(path)) })
	defer stop()
	s, _ := w.a.Spec()
	k, err := backup.KeysFor(s.Backup.Encryption)
	if err != nil {
		return 0, err
	}
	if !k.Encrypts() {
		return w.Client.SaveSnapshot(ctx, endpoint, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("snapshot dir: %w", err)
	}
	return backup.EncryptFile(path, k.Recipients, func(wr io.Writer) (int64, error) {
		return w.Client.WriteSnapshot(ctx, endpoint, wr)
	})
}

// recentSnapshot is this host's newest verified scheduled snapshot of the
// cluster clusterID when it is at most repair.snapshotMaxAge old (and not
// from the future: a clock stepped back proves nothing about its age).
func (a *Agent) recentSnapshot(clusterID uint64) (string, bool) {
	s, self := a.Spec()
	maxAge := s.Repair.SnapshotMaxAge.Duration
	if maxAge <= 0 {
		return "", false
	}
	entries, err := backup.List(self.SnapshotDir, s.Cluster.Name)
	if err != nil {
		return "", false
	}
	e, ok := backup.NewestVerified(entries, fmt.Sprintf("%x", clusterID))
	if !ok {
		return "", false
	}
	age := time.Since(e.Sidecar.TakenAt)
	if age < 0 || age > maxAge {
		return "", false
	}
	// An encrypted one is reused only when this host's identity decrypts
	// it, in full, to the plaintext its sidecar records (backup.Decrypts:
	// nothing written); a host without the identity file reuses
	// it as the scheduled copy it is (intact: its sha256 is its
	// sidecar's), readable where the identity is.
	if e.Sidecar.Encryption != nil {
		if k := backup.KeysToRead(s.Backup.Encryption); k.CanRead() {
			if err := backup.Decrypts(e.Path(), e.Sidecar, k.Identities); err != nil {
				a.lg.Warn("the newest scheduled snapshot is not reused by the repair: this host cannot read it", zap.String("file", e.Path()), zap.Error(err))
				return "", false
			}
		}
	}
	return e.Path(), true
}
