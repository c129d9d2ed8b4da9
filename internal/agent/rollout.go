package agent

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// restartDue is why the running etcd must restart to be what the spec
// says (model.Restart): its settings changed, or its binary (another
// version, path or file). want is the etcd the spec names, when known.
func (a *Agent) restartDue(s *spec.Spec, self spec.Member) (r model.Restart, want string) {
	w, err := a.wantedBinary(s)
	if err != nil {
		a.lg.Debug("etcd binary", zap.Error(err))
	} else {
		want = w.Version.String()
	}
	if a.binary != nil && err == nil {
		if why := binaryChange(*a.binary, w); why != "" {
			r = r.Also(why)
			r.EtcdFrom, r.EtcdTo = a.binary.Version.String(), w.Version.String()
		}
	}
	if a.settings != "" && a.settings != etcdproc.Settings(s, self) {
		r = r.Also("changed settings")
	}
	return r, want
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
	k, err := backup.KeysFor(s.Backup.Encryption)
	if err != nil {
		return "rollout snapshot failed", false, err
	}
	t := backup.Taker{Client: a.client, Cluster: s.Cluster.Name, Member: self.Name, Dir: self.SnapshotDir, By: backup.ByRollout, Keys: k}
	e, err := t.Take(ctx)
	if err != nil {
		return "rollout snapshot failed", false, fmt.Errorf("snapshot before the rollout (%s): %w", in.Local.Restart.Why, err)
	}
	a.rolloutSnapshot = key
	a.lg.Info("rollout snapshot taken", zap.String("path", e.Path()), zap.String("rollout", key))
	a.remember(history.Event{Kind: "rollout-snapshot", Reason: act.Reason, Detail: map[string]string{"path": e.Path()}})
	return fmt.Sprintf("rollout snapshot: %s (verified)", e.Path()), true, nil
}

// fileKey is what tells one file from another at a path: a file renamed
// over it has another inode, one rewritten in place another ctime (which
// user space cannot set back, unlike the mtime that cp -p, rsync -a and
// install -p keep).
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func fileKeyOf(fi os.FileInfo) fileKey {
	k := fileKey{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino, k.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return k
}

// cachedBinary is what a binary file was, by its fileKey.
type cachedBinary struct {
	key     fileKey
	binary  spec.Binary
	readErr error
}

// readBinary is spec.ReadBinary, run again only when the file changed
// (fileKey): the restart rule asks every pass.
func (a *Agent) readBinary(path string) (spec.Binary, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return spec.Binary{Path: path}, fmt.Errorf("etcd binary: %w", err)
	}
	key := fileKeyOf(fi)
	if c, ok := a.binaries[path]; ok && c.key == key {
		return c.binary, c.readErr
	}
	b, err := spec.ReadBinary(path)
	if a.binaries == nil {
		a.binaries = map[string]cachedBinary{}
	}
	a.binaries[path] = cachedBinary{key: key, binary: b, readErr: err}
	return b, err
}

// wantedBinary is the etcd the spec names now: etcd.binary as read, or
// the built-in one (Path "").
func (a *Agent) wantedBinary(s *spec.Spec) (spec.Binary, error) {
	if s.Etcd.Binary == "" {
		return spec.Binary{Version: spec.BuiltinVersion()}, nil
	}
	return a.readBinary(s.Etcd.Binary)
}

// checkBinary is the check before every start of etcd: the spec's
// etcd.binary runs and says its version, and has etcd.sha256 when the
// spec gives one. A mismatch starts nothing.
func (a *Agent) checkBinary(s *spec.Spec) (spec.Binary, error) {
	if s.Etcd.Binary != "" {
		// Hashed afresh, not from the cache: a start is rare, and what it
		// runs is what etcd.sha256 vouches for.
		delete(a.binaries, s.Etcd.Binary)
	}
	b, err := a.wantedBinary(s)
	if err != nil {
		return b, fmt.Errorf("not starting etcd: %w", err)
	}
	if s.Etcd.SHA256 != "" && b.SHA256 != s.Etcd.SHA256 {
		return b, fmt.Errorf("not starting etcd: %s has sha256 %s, but etcd.sha256 in %s says %s: install the binary the spec means, or fix etcd.sha256",
			b.Path, b.SHA256, s.Path, s.Etcd.SHA256)
	}
	return b, nil
}

// binaryChange says how the etcd the spec names differs from the one
// running ("" when it does not), with the versions.
func binaryChange(running, want spec.Binary) string {
	switch {
	case running.Version != want.Version:
		return fmt.Sprintf("etcd %s → %s", running.Version, want.Version)
	case running.Path != want.Path:
		return fmt.Sprintf("etcd binary %s → %s (%s)", orBuiltin(running.Path), orBuiltin(want.Path), want.Version)
	case running.SHA256 != want.SHA256:
		return fmt.Sprintf("etcd binary %s changed on disk (%s)", orBuiltin(want.Path), want.Version)
	}
	return ""
}

func orBuiltin(path string) string {
	if path == "" {
		return "built-in"
	}
	return path
}

// downgrade makes one call of etcd's downgrade API: enable after
// validate (etcd says there whether the cluster can go down to the
// target), or cancel.
func (a *Agent) downgrade(ctx context.Context, act reconcile.Action) (string, bool, error) {
	d := act.Downgrade
	if d.Action == "enable" {
		if err := a.client.Downgrade(ctx, "validate", d.Target); err != nil {
			return "etcd refuses the downgrade", false, err
		}
	}
	if err := a.client.Downgrade(ctx, d.Action, d.Target); err != nil {
		return "downgrade " + d.Action + " failed", false, err
	}
	a.lg.Warn("etcd downgrade", zap.String("action", d.Action), zap.String("target", d.Target), zap.String("reason", act.Reason))
	a.remember(history.Event{Kind: "downgrade-" + d.Action, Reason: act.Reason, Detail: map[string]string{"target": d.Target}})
	return act.Reason, true, nil
}
