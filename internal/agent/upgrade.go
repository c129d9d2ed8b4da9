package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/upgrade"
)

// observeBinary looks at the agent's own executable (package upgrade):
// one stat per pass; a hash and a `version` run once per new file.
func (a *Agent) observeBinary(ctx context.Context) model.Binary {
	s, _ := a.Spec()
	b := model.Binary{External: s.Etcd.Binary != ""}
	if a.exe == nil {
		return b
	}
	b.Running = a.exe.Build
	b.Installed, b.InstalledErr = a.exe.Installed(ctx)
	seen := b.InstalledErr
	if b.Installed != nil {
		seen = b.Installed.String()
	}
	if seen != a.installedSeen {
		a.installedSeen = seen
		switch {
		case b.Installed != nil:
			a.lg.Warn("a new etcdkeeper binary is installed: restarting onto it in this member's turn",
				zap.String("path", a.exe.Path), zap.Stringer("running", b.Running), zap.Stringer("installed", b.Installed))
		case b.InstalledErr != "":
			a.lg.Warn("the etcdkeeper binary at the agent's path was replaced, but is not run (yet)", zap.String("path", a.exe.Path), zap.String("error", b.InstalledErr))
		}
	}
	pending := 0.0
	if b.Installed != nil {
		pending = 1
	}
	a.metrics.Build.Pending.Set(pending)
	a.updateStatus(func(st *Status) { st.Installed, st.InstalledErr = b.Installed, b.InstalledErr })
	return b
}

// binaryRestart adds the new binary to the reasons the member must
// restart: the agent restarts onto it (Restart.Agent), through the one
// rolling-restart rule.
func binaryRestart(r model.Restart, b model.Binary, adoptable bool) model.Restart {
	if !b.Replaced() {
		return r
	}
	// The same embedded etcd, and nothing else to restart it for: the
	// agent execs alone, and the new process adopts the running etcd.
	r.AgentOnly = !r.Due() && adoptable && !b.External && b.Running.EtcdVersion == b.Installed.EtcdVersion
	r = r.Also(fmt.Sprintf("etcdkeeper %s → %s", b.Running, b.Installed))
	r.Agent = true
	if !b.External && b.Running.EtcdVersion != b.Installed.EtcdVersion && r.EtcdTo == "" {
		// Another embedded etcd: the rule's etcd preflight (and, one minor
		// down, etcd's downgrade) applies as to an etcd.binary change.
		r.EtcdFrom, r.EtcdTo = b.Running.EtcdVersion, b.Installed.EtcdVersion
	}
	return r
}

// resumeUpgrade, at the first pass: an open upgrade journal means this
// process is the new binary the old one exec'd (or systemd started after
// the old one was killed mid-step). It takes the cluster lock back on the
// old lease, so the step ends under the same lock: the member catches up
// before the next host goes (reconcile.finishUpgrade).
func (a *Agent) resumeUpgrade(ctx context.Context) {
	if a.upgradeLooked {
		return
	}
	a.upgradeLooked = true
	j, err := upgrade.Load(a.statePath(upgrade.FileName))
	if err != nil {
		// Not a reason to keep the member stopped: the next host's rule
		// (a caught-up quorum without it) does not rest on this journal.
		a.lg.Error("the upgrade journal is unreadable: going on as if it were closed", zap.Error(err))
		return
	}
	if !j.Open() {
		return
	}
	a.upgrading = j
	fields := []zap.Field{zap.Stringer("from", j.From), zap.Stringer("to", a.build()), zap.Time("journaled", j.At)}
	if j.Lease != 0 && a.lock == nil {
		s, _ := a.Spec()
		l, err := a.client.ResumeLock(ctx, s.Cluster.Name, clientv3.LeaseID(j.Lease))
		if err != nil {
			a.lg.Warn("restarted onto the new binary without the cluster lock (the next member still waits until this one has caught up)", append(fields, zap.Error(err))...)
			return
		}
		a.lock, a.lockSince, a.restarted = l, time.Now(), true
		fields = append(fields, zap.String("lease", fmt.Sprintf("%x", j.Lease)))
	}
	a.lg.Info("restarted onto the new binary: finishing the step (catch up, then pass the lock on)", fields...)
}

// upgraded is the open upgrade journal as the decision sees it.
func (a *Agent) upgraded() *model.Upgraded {
	if !a.upgrading.Open() {
		return nil
	}
	return &model.Upgraded{From: a.upgrading.From, To: a.build(), Lock: a.lock != nil && a.lock.Held()}
}

func (a *Agent) build() model.Build {
	if a.exe == nil {
		return model.Build{}
	}
	return a.exe.Build
}

// restartOntoBinary is the agent's turn in a rollout of a new binary:
// journal, stop etcd gracefully, exec the new binary (same PID: see
// upgrade.Self.Exec). The cluster lock's lease is neither revoked nor
// released: the new process resumes it (resumeUpgrade) and passes it on
// once its member has caught up. Each line may be the last one (kill -9):
// see upgrade.Journal.
func (a *Agent) restartOntoBinary(act reconcile.Action, in reconcile.Input) (string, bool, error) {
	inst := in.Local.Binary.Installed
	if a.exe == nil || inst == nil {
		return "restart onto the new binary", false, errors.New("no new binary at the agent's path any more")
	}
	j := upgrade.Journal{From: a.exe.Build, To: *inst, At: time.Now().UTC()}
	if a.lock != nil {
		j.Lease = int64(a.lock.Lease())
	}
	path := a.statePath(upgrade.FileName)
	if err := a.noteWrite(upgrade.FileName, upgrade.Save(path, j)); err != nil {
		return "journaling the restart onto the new binary", false, err
	}
	a.lg.Warn("restarting onto the new binary", zap.String("path", a.exe.Path), zap.Stringer("from", j.From), zap.Stringer("to", j.To),
		zap.String("why", act.Restart.Why), zap.String("lease", fmt.Sprintf("%x", j.Lease)))
	a.remember(history.Event{Kind: "agent-restart", Reason: act.Reason, Detail: map[string]string{"from": j.From.String(), "to": j.To.String()}})
	a.notify.Status("restarting onto etcdkeeper " + j.To.String())
	if act.Restart.AgentOnly {
		return a.execKeepingEtcd(j, path)
	}
	if _, err := a.etcd.Stop(); err != nil {
		return "restart onto the new binary: stop etcd", false, err
	}
	a.data = nil
	err := a.exec()
	// Still here: the exec failed. etcd starts again on the next pass
	// (the lock stays until it has caught up); the file is not tried
	// again until it changes.
	a.exe.Failed(err)
	a.restarted = true
	j.Done = time.Now().UTC()
	_ = a.noteWrite(upgrade.FileName, upgrade.Save(path, j))
	return "restart onto the new binary failed: starting etcd again", true, err
}

// exec execs the new binary (returning only when that failed). The
// agent record goes with this process's lease (and with it the restart
// it announced as pending); the new process publishes its own.
func (a *Agent) exec() error {
	if a.cfg.CrashAt == "upgrade-exec" {
		a.lg.Error("test crash point reached: exiting hard", zap.String("step", "upgrade-exec"))
		os.Exit(3)
	}
	if a.presence != nil {
		_ = a.presence.Close()
		a.presence = nil
	}
	_ = a.lg.Sync()
	return a.exe.Exec()
}

// execKeepingEtcd is the agent's exec onto a new binary that embeds the
// same etcd: etcd keeps running through it (its pipes stay open, it
// stays this PID's child), and the new process adopts it (adoptEtcd). The
// journal says so before the pipes are opened up: killed in between,
// etcd ends with this process (its lifeline), and the new one starts it
// again as after any crash.
func (a *Agent) execKeepingEtcd(j upgrade.Journal, path string) (string, bool, error) {
	p := a.etcd.Process()
	h, err := p.Handoff()
	if err != nil {
		return "restart onto the new binary: hand etcd over", false, err
	}
	a.mu.Lock()
	trust := slices.Clone(a.etcdTrust)
	a.mu.Unlock()
	j.Etcd, j.Settings, j.Trust = &h, a.settings, trust
	if err := a.noteWrite(upgrade.FileName, upgrade.Save(path, j)); err != nil {
		p.KeepCloseOnExec()
		return "journaling the hand-over of etcd", false, err
	}
	a.lg.Info("handing the running etcd to the new binary", zap.Int("etcd-pid", h.PID))
	err = a.exec()
	// Still here: the exec failed, and etcd runs on with this process.
	p.KeepCloseOnExec()
	a.exe.Failed(err)
	a.restarted = true
	j.Done, j.Etcd = time.Now().UTC(), nil
	_ = a.noteWrite(upgrade.FileName, upgrade.Save(path, j))
	return "restart onto the new binary failed: the agent runs on, its etcd too", true, err
}

// adoptEtcd, before anything else at start: an open upgrade journal that
// hands over a running etcd means this process is the new binary the old
// one exec'd into, and the etcd it names is still its child. It is
// adopted as it runs; nothing is stopped or started. A hand-over that
// cannot be taken (the old process was killed before its exec, and etcd
// with it) adopts nothing: the start path goes on as after a crash.
func (a *Agent) adoptEtcd() bool {
	j, err := upgrade.Load(a.statePath(upgrade.FileName))
	if err != nil || !j.Open() || j.Etcd == nil {
		return false
	}
	s, self := a.Spec()
	h := *j.Etcd
	p, err := a.etcd.Adopt(h, etcdproc.CommandFor(s, self, etcdproc.AsIs(), a.cfg.Self, a.cfg.Env))
	if err != nil {
		a.lg.Warn("the old binary handed over its etcd, but it cannot be adopted: starting etcd as after a crash", zap.Error(err))
		return false
	}
	// The same embedded etcd as the new binary's, or no exec would have
	// handed it over (binaryRestart).
	a.binary = &spec.Binary{Version: spec.BuiltinVersion()}
	if v, err := spec.ParseVersion(j.From.EtcdVersion); err == nil {
		a.binary.Version = v
	}
	// What etcd read when it started, not what the files hold now: a CA
	// changed meanwhile is a restart still due.
	a.settings = j.Settings
	a.mu.Lock()
	a.etcdTrust = j.Trust
	a.mu.Unlock()
	a.updateStatus(func(st *Status) { st.EtcdPID = p.PID() })
	a.lg.Info("adopted the running etcd from the old binary", zap.Int("pid", p.PID()), zap.Stringer("from", j.From), zap.Stringer("to", a.build()),
		zap.Duration("exec", time.Since(j.At).Round(time.Millisecond)))
	return true
}

// finishUpgrade closes the upgrade journal: the member is a caught-up
// healthy voter on the new binary (the decision gives the lock back).
func (a *Agent) finishUpgrade(act reconcile.Action) (string, bool, error) {
	if a.upgrading == nil {
		return act.Reason, false, nil
	}
	j := *a.upgrading
	j.Done = time.Now().UTC()
	if err := a.noteWrite(upgrade.FileName, upgrade.Save(a.statePath(upgrade.FileName), j)); err != nil {
		return "closing the upgrade journal", false, err
	}
	a.upgrading = nil
	a.lg.Info("upgrade finished", zap.Stringer("from", j.From), zap.Stringer("to", a.build()), zap.Duration("took", j.Done.Sub(j.At).Round(time.Millisecond)))
	a.remember(history.Event{Kind: "agent-upgraded", Reason: act.Reason, Detail: map[string]string{"from": j.From.String(), "to": a.build().String()}})
	return act.Reason, true, nil
}
