package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// recoveryFile is this host's recovery journal in agent.stateDir.
const recoveryFile = "recovery.json"

// DefaultRevisionBump is how far a recovery from a snapshot moves the
// revision past the snapshot's, as Kubernetes' etcd restore guide does:
// watchers (kube-apiserver's informers) never see a revision go back.
const DefaultRevisionBump = 1_000_000_000

func (a *Agent) loadRecovery() (recovery.Journal, error) {
	return recovery.Load(a.statePath(recoveryFile))
}

// saveRecovery journals a step of this host's part in a recovery and
// shows it in the status.
func (a *Agent) saveRecovery(j recovery.Journal) error {
	a.recMu.Lock()
	defer a.recMu.Unlock()
	return a.saveRecoveryLocked(j)
}

// saveRecoveryLocked is saveRecovery with recMu held.
func (a *Agent) saveRecoveryLocked(j recovery.Journal) error {
	prev := a.Status().Recovery
	if err := a.noteWrite(recoveryFile, recovery.Save(a.statePath(recoveryFile), j)); err != nil {
		return err
	}
	a.updateStatus(func(s *Status) { s.Recovery = &j })
	a.rememberRecovery(prev, j)
	a.lg.Warn("recovery step", zap.String("id", j.ID), zap.String("role", string(j.Role)), zap.String("step", string(j.Step)),
		zap.String("source", j.Source), zap.String("error", j.Error))
	return nil
}

// recoveryOf is the journal as far as decisions care.
func recoveryOf(j recovery.Journal) model.Recovery {
	return model.Recovery{ID: j.ID, Role: string(j.Role), Step: string(j.Step), Source: j.Source,
		OldMemberID: j.OldMemberID, OldClusterID: j.OldClusterID, FromSnapshot: j.Snapshot != "", ForcedFrom: j.ForcedFrom}
}

// Recover takes a recovery request (POST /recovery): it is journaled here
// and carried out by the loop, step by step. Refused while this member is
// a healthy voter (its cluster has a quorum), or while another recovery
// is under way on this host.
func (a *Agent) Recover(r recovery.Request) (recovery.Journal, error) {
	if err := a.waitObserved(); err != nil {
		return recovery.Journal{}, err
	}
	a.recMu.Lock()
	defer a.recMu.Unlock()
	s, self := a.Spec()
	if r.Role == recovery.RoleSource && r.Source != self.Name {
		return recovery.Journal{}, fmt.Errorf("this agent runs %s, not the source %s", self.Name, r.Source)
	}
	if _, ok := s.Lookup(r.Source); !ok && r.Snapshot == "" {
		return recovery.Journal{}, fmt.Errorf("source %s is not in the spec", r.Source)
	}
	if r.Role == recovery.RoleFenced && r.Source == self.Name {
		return recovery.Journal{}, fmt.Errorf("%s is the source of recovery %s: it cannot be fenced by it", self.Name, r.ID)
	}
	cur, err := a.loadRecovery()
	if err != nil {
		return cur, err
	}
	if r.Abort {
		j, err := recovery.Accept(cur, r, 0, time.Now())
		if err != nil {
			return cur, err
		}
		if err := a.saveRecoveryLocked(j); err != nil {
			return cur, err
		}
		a.Wake()
		return j, nil
	}
	if cur.ID == r.ID && cur.Role == r.Role {
		return cur, nil // asked again: the same recovery, under way or done
	}
	if err := a.needsRecovery(self.Name); err != nil {
		return recovery.Journal{}, err
	}
	old := a.memberID()
	if m, err := a.loadMarker(); err == nil && m != nil {
		if old == 0 {
			old = m.MemberID
		}
		if r.OldClusterID == 0 {
			// The caller could not read it (corrupt data): the cluster this
			// host last ran in, for the record that fences late hosts.
			r.OldClusterID = m.ClusterID
		}
	}
	j, err := recovery.Accept(cur, r, old, time.Now())
	if err != nil {
		return cur, err
	}
	if j.Step != cur.Step || j.ID != cur.ID {
		if err := a.saveRecoveryLocked(j); err != nil {
			return cur, err
		}
		a.Wake()
	}
	return j, nil
}

// firstPassWait bounds how long a recovery request waits for the loop's
// first pass (the CLI gives each call 20 s); a variable for tests.
var firstPassWait = 15 * time.Second

// waitObserved waits for the loop's first pass: before it, the status is
// all zero (no member, no health), which would pass for "no quorum".
func (a *Agent) waitObserved() error {
	t := time.NewTimer(firstPassWait)
	defer t.Stop()
	select {
	case <-a.observed:
		return nil
	case <-t.C:
		return fmt.Errorf("the agent has not finished its first look at its member in %s: try again; nothing was changed", firstPassWait)
	}
}

// needsRecovery refuses a request while this member, asked now, has a
// leader (its cluster has a quorum), or, when it does not answer, while
// the loop's last pass saw it a healthy voter of a cluster with a healthy
// quorum. It is only the first of the guards: the loop asks again at each
// pass before it stops anything (reconcile.decideFenced, decideSource).
func (a *Agent) needsRecovery(name string) error {
	if ans, ok := a.liveAnswer(); ok {
		if ans.Leader != 0 {
			return fmt.Errorf("%s answers with a leader (%x): its cluster has a quorum and needs no recovery; nothing was changed", name, ans.Leader)
		}
		return nil // no leader now; the loop waits for reconcile.FenceNoLeader before a stop
	}
	if st := a.Status(); st.Healthy && st.Quorum {
		return fmt.Errorf("%s is a healthy voter and %d of %d voters are healthy: the cluster needs no recovery; nothing was changed",
			name, st.HealthyVoters, st.Voters)
	}
	return nil
}

// leaderlessFor is how long the local etcd has had no leader (see
// model.Local.LeaderlessFor), given this pass's answer.
func (a *Agent) leaderlessFor(ans *model.Answer) time.Duration {
	now := time.Now()
	if ans != nil && ans.Leader != 0 {
		a.leaderAt = now
		return 0
	}
	since := a.leaderAt
	if p := a.etcd.Process(); p != nil && p.Started().After(since) {
		since = p.Started()
	}
	return now.Sub(since)
}

// Inspect reports this member's data for a recovery plan (GET /recovery):
// while etcd runs, what it answered last; while it is stopped, an offline
// look at the data dir.
func (a *Agent) Inspect() recovery.Inspection {
	s, self := a.Spec()
	st := a.Status()
	in := recovery.Inspection{Name: self.Name, Reachable: true, EtcdRunning: st.EtcdPID != 0, Recovery: st.Recovery}
	if in.Recovery == nil {
		if j, err := a.loadRecovery(); err == nil && j.Step != "" {
			in.Recovery = &j
		}
	}
	if ans, ok := a.liveAnswer(); in.EtcdRunning && ok {
		// Asked now: the loop's last pass may be seconds old (5 s while
		// steady), and a leader that just lost its quorum must not pass
		// for a healthy voter.
		in.Data, in.ClusterID, in.MemberID = "serving", fmt.Sprintf("%x", ans.Header.ClusterId), fmt.Sprintf("%x", ans.Header.MemberId)
		in.Term, in.Index, in.Revision = ans.RaftTerm, ans.RaftIndex, ans.Header.Revision
		in.HealthyVoter = (&model.Answer{Leader: ans.Leader, IsLearner: ans.IsLearner}).ServingVoter()
	} else if in.EtcdRunning && st.MemberID != "" && !st.LastPass.IsZero() {
		in.Data, in.ClusterID, in.MemberID = "serving", st.ClusterID, st.MemberID
		in.Term, in.Index, in.Revision = st.RaftTerm, st.RaftIndex, st.Revision
		in.HealthyVoter = st.Healthy
	} else {
		// The loop's last full check when etcd is stopped; else (an etcd
		// started after the quorum was lost never serves, and keeps the db
		// locked) the WAL alone tells how far the data goes. The handler
		// never runs a full check itself: on a large db it would outlast
		// the caller's deadline.
		a.mu.Lock()
		last := a.lastReport
		a.mu.Unlock()
		var r repair.Report
		if last != nil && !in.EtcdRunning {
			r = *last
		} else {
			r = repair.InspectWAL(a.lg, self.DataDir)
		}
		in.Data, in.Reason = r.State.String(), r.Reason
		if in.EtcdRunning && r.State == repair.DirHealthy {
			in.Data = "running"
		}
		switch r.State {
		case repair.DirTornTail:
			in.Data = "healthy" // etcd cuts the torn tail itself
		case repair.DirMissing:
			in.Data = "empty"
		}
		if r.MemberID != 0 {
			in.ClusterID, in.MemberID = fmt.Sprintf("%x", r.ClusterID), fmt.Sprintf("%x", r.MemberID)
		}
		in.Term, in.Index, in.Revision = r.Term, r.CommitIndex, r.Revision
	}
	in.Voters, in.VotersFrom = a.knownVoters(in.EtcdRunning, st)
	if entries, err := backup.List(self.SnapshotDir, s.Cluster.Name); err == nil {
		if e, ok := backup.NewestVerified(entries, a.snapshotClusterID(in.ClusterID)); ok {
			v := e.Sidecar.Verification
			in.Snapshot = &recovery.Snapshot{Path: e.Path(), TakenAt: e.Sidecar.TakenAt, Revision: v.Revision, Keys: v.TotalKey, Size: e.Size}
		}
	}
	return in
}

// knownVoters is the voter list this host knows, for recover's majority
// check: its etcd's member list (serializable: a member without a leader
// answers it from its own state), else, with etcd stopped, the members
// its db lists (read offline), else the last cluster the loop observed.
func (a *Agent) knownVoters(running bool, st Status) ([]recovery.Voter, string) {
	if running {
		if ms, ok := a.liveMembers(); ok {
			var vs []recovery.Voter
			for _, m := range ms {
				if !m.IsLearner {
					vs = append(vs, recovery.Voter{ID: fmt.Sprintf("%x", m.ID), Name: m.Name})
				}
			}
			return vs, recovery.VotersEtcd
		}
	} else {
		_, self := a.Spec()
		ms, err := repair.DBMembers(self.DataDir)
		if err != nil {
			a.lg.Warn("reading the members my data lists", zap.Error(err))
		}
		var vs []recovery.Voter
		for _, m := range ms {
			if !m.Learner {
				vs = append(vs, recovery.Voter{ID: fmt.Sprintf("%x", m.ID), Name: m.Name})
			}
		}
		if len(vs) > 0 {
			return vs, recovery.VotersDB
		}
	}
	var vs []recovery.Voter
	for _, m := range st.Members {
		if !m.Learner {
			vs = append(vs, recovery.Voter{ID: m.ID, Name: m.Name})
		}
	}
	if len(vs) == 0 {
		return nil, ""
	}
	return vs, recovery.VotersObserved
}

// liveMembers asks the local etcd for its member list now, serializable.
func (a *Agent) liveMembers() (ms []*etcdserverpb.Member, ok bool) {
	ok = a.askLocal(func(ctx context.Context, cli *cluster.Client, _ string) (err error) {
		ms, err = cli.LocalMembers(ctx)
		return err
	})
	return ms, ok
}

// recoverStep carries out a recovery action of the decision.
func (a *Agent) recoverStep(ctx context.Context, act reconcile.Action) (string, bool, error) {
	j, err := a.loadRecovery()
	if err != nil {
		return "reading the recovery journal", false, err
	}
	if act.Kind == reconcile.DoAcceptFence {
		return a.acceptFence(j, act)
	}
	if !j.Open() {
		return "the recovery is over", false, nil
	}
	switch act.Kind {
	case reconcile.DoStopForRecovery:
		return a.stopForRecovery(j, act.Reason)
	case reconcile.DoRefuseRecovery:
		j.Step, j.Error = recovery.StepRefused, act.Reason
		a.metrics.Recoveries.WithLabelValues("refused").Inc()
		return act.Reason, false, a.saveRecovery(j)
	case reconcile.DoEndFence:
		// Called off by this agent: its cluster has a quorum.
		j.Step, j.Error = recovery.StepAborted, act.Reason
		a.metrics.Recoveries.WithLabelValues("fence-ended").Inc()
		return act.Reason, true, a.saveRecovery(j)
	case reconcile.DoForceNewCluster:
		return a.forceNewCluster(j, act.Reason)
	case reconcile.DoRestoreSnapshot:
		return a.restoreSnapshot(j, act.Reason)
	case reconcile.DoFinishRecovery:
		return a.finishRecovery(ctx, j, act.Reason)
	}
	return act.Reason, false, fmt.Errorf("not a recovery step: %s", act.Kind)
}

func (a *Agent) stopForRecovery(j recovery.Journal, why string) (string, bool, error) {
	a.crashPoint("recover-stop")
	if p := a.etcd.Process(); p != nil && p.Running() {
		e, err := a.etcd.Stop()
		if err != nil {
			return "stopping etcd for the recovery", false, err
		}
		a.noteExit(e.String(), e.Uptime, repair.Verdict{Class: repair.ClassNone, Reason: why}, true)
	}
	if j.Role == recovery.RoleSource && j.Step == recovery.StepRequested {
		j.Step = recovery.StepStopped
		if err := a.saveRecovery(j); err != nil {
			return "journaling the stop", false, err
		}
	}
	return why, true, nil
}

// forceNewCluster journals the step, then starts etcd with
// --force-new-cluster: a crash after the journal starts it so again, which
// changes nothing more (the other members are gone already).
func (a *Agent) forceNewCluster(j recovery.Journal, why string) (string, bool, error) {
	if j.Step != recovery.StepForced {
		j.Step = recovery.StepForced
		if a.data != nil {
			// What it is forced from: once the data lists others, the
			// forced start took, and is never made again.
			j.ForcedFrom = a.data.Members
		}
		if err := a.saveRecovery(j); err != nil {
			return "journaling the forced start", false, err
		}
	}
	a.crashPoint("recover-force")
	if err := a.launch(etcdproc.ForceNewCluster()); err != nil {
		return "starting etcd as a one-member cluster failed", false, err
	}
	return why, true, nil
}

// restoreSnapshot moves the data dir aside (kept), restores the snapshot
// as a new one-member cluster into a scratch dir on the backup dir's
// filesystem, moves it into place and starts etcd on it. Each step is
// journaled; a resumed restore redoes only the unfinished one.
func (a *Agent) restoreSnapshot(j recovery.Journal, why string) (string, bool, error) {
	s, self := a.Spec()
	// An encrypted snapshot is decrypted into memory only (never onto a
	// disk), removed when this returns; a resumed restore decrypts again,
	// and first removes what an agent killed inside a restore left there.
	backup.SweepMemory()
	var plain backup.Restorable
	defer func() { plain.Close() }()
	if j.Step == recovery.StepRequested || j.Step == recovery.StepStopped {
		stop := a.notify.While(func() int64 { return 0 })
		p, err := a.snapshotForRestore(s, j.Snapshot)
		stop()
		if err != nil {
			j.Step, j.Error = recovery.StepRefused, fmt.Sprintf("the snapshot %s cannot be restored: %v; nothing was changed", j.Snapshot, err)
			return j.Error, false, a.saveRecovery(j)
		}
		plain = p
		a.crashPoint("recover-move")
		dest, err := repair.MoveAside(self.DataDir, self.BackupDir, time.Now())
		if err != nil {
			return "moving the data dir aside for the restore", false, err
		}
		a.data = nil
		a.clearSuspect()
		j.Step, j.Aside = recovery.StepMoved, dest
		if err := a.saveRecovery(j); err != nil {
			return "journaling the move", false, err
		}
	}
	if j.Step == recovery.StepMoved {
		a.crashPoint("recover-restore")
		if _, err := os.Lstat(filepath.Join(self.DataDir, "member")); plain.Path == "" && err != nil {
			// Resumed before the restore was moved into place: the
			// decrypted copy went with the last attempt.
			p, err := a.snapshotForRestore(s, j.Snapshot)
			if err != nil {
				return "the snapshot cannot be restored any more", false, err
			}
			plain = p
		}
		scratch := filepath.Join(self.BackupDir, "restore-"+j.ID)
		stop := a.notify.While(func() int64 { return dirBytes(scratch) })
		err := restoreInto(s.Cluster.Name, j, plain.Path, self.Name, self.PeerURLs, self.DataDir, scratch)
		plain.Close() // the plaintext goes as soon as the restore has read it
		stop()
		if err != nil {
			return "restoring the snapshot", false, err
		}
		a.crashPoint("after-recover-restore")
		j.Step = recovery.StepRestored
		if err := a.saveRecovery(j); err != nil {
			return "journaling the restore", false, err
		}
	}
	if j.Step == recovery.StepRestored {
		j.Step = recovery.StepForced
		if err := a.saveRecovery(j); err != nil {
			return "journaling the start", false, err
		}
	}
	if err := a.launch(etcdproc.AsIs()); err != nil {
		return "starting etcd on the restored data failed", false, err
	}
	return why, true, nil
}

// snapshotForRestore checks the snapshot at path in full before anything
// changes (backup.ForRestore: its sidecar when it has one, etcd's own
// checks) and returns the plaintext to restore from: the file itself, or,
// when it is encrypted, its decryption with this host's identity file, in
// memory only. The caller closes it.
func (a *Agent) snapshotForRestore(s *spec.Spec, path string) (backup.Restorable, error) {
	return backup.ForRestore(path, backup.KeysToRead(s.Backup.Encryption))
}

// restoreInto restores j's snapshot with etcdutl's restore code as a new
// one-member cluster of this member (a new cluster ID: the token names
// the recovery), with the revision bumped and marked compacted, and moves
// the result into dataDir. The scratch dir is the restore's own output,
// made again from the snapshot on a resume.
func restoreInto(clusterName string, j recovery.Journal, snapshotPath, name string, peerURLs []string, dataDir, scratch string) error {
	member := filepath.Join(dataDir, "member")
	if _, err := os.Lstat(member); err == nil {
		// The journal says the data dir was moved aside, and nothing but
		// this restore writes a member into it before etcd starts: a
		// restore that was killed after its rename, before its journal.
		_ = os.RemoveAll(scratch)
		return nil
	}
	// The scratch dir is this restore's own output (the recovery ID is
	// checked: letters, digits, '.', '_', '-'), made again from the
	// snapshot: an earlier attempt's is cleared.
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("clearing the scratch dir of an earlier attempt: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(scratch), 0o700); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	var initial []string
	for _, u := range peerURLs {
		initial = append(initial, name+"="+u)
	}
	bump := j.RevisionBump
	if bump == 0 {
		bump = DefaultRevisionBump
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snapshotPath, Name: name, OutputDataDir: scratch, PeerURLs: peerURLs,
		InitialCluster: strings.Join(initial, ","), InitialClusterToken: clusterName + "-recovery-" + j.ID,
		RevisionBump: bump, MarkCompacted: true,
	})
	if err != nil {
		return fmt.Errorf("restore %s: %w", j.Snapshot, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Rename(filepath.Join(scratch, "member"), member); err != nil {
		return fmt.Errorf("moving the restored member into %s: %w", dataDir, err)
	}
	if err := atomicfile.SyncDir(dataDir); err != nil {
		return fmt.Errorf("restored into %s, but: %w", dataDir, err)
	}
	if err := os.Remove(scratch); err != nil {
		return fmt.Errorf("restored, but: %w", err)
	}
	return nil
}

// acceptFence journals this host's part in a recovery it learned of late,
// from the recovered cluster's record.
func (a *Agent) acceptFence(cur recovery.Journal, act reconcile.Action) (string, bool, error) {
	r := act.Recovered
	old := uint64(0)
	if a.data != nil {
		old = a.data.MemberID
	}
	if m, err := a.loadMarker(); err == nil && m != nil && old == 0 {
		old = m.MemberID
	}
	j, err := recovery.Accept(cur, recovery.Request{ID: r.ID, Role: recovery.RoleFenced, Source: r.Source, OldClusterID: r.OldClusterID}, old, time.Now())
	if err != nil {
		return "taking part in the recovery", false, err
	}
	if err := a.saveRecovery(j); err != nil {
		return "journaling the fence", false, err
	}
	return act.Reason, true, nil
}

// finishRecovery closes this host's part: the source leads the recovered
// cluster (and records the recovery in it, for hosts that were away), or
// this fenced host's new member is a voter of it.
func (a *Agent) finishRecovery(ctx context.Context, j recovery.Journal, why string) (string, bool, error) {
	st := a.Status()
	j.ClusterID, _ = strconv.ParseUint(st.ClusterID, 16, 64)
	j.MemberID, _ = strconv.ParseUint(st.MemberID, 16, 64)
	if j.Role == recovery.RoleSource {
		if j.Step == recovery.StepForced {
			// The forced start took: journaled on its own, before the record,
			// so that a finish that keeps failing never forces again. If this
			// write fails too, the data's membership tells (forcedTook).
			j.Step = recovery.StepLed
			if err := a.saveRecovery(j); err != nil {
				a.lg.Error("journaling that the forced start led", zap.String("id", j.ID), zap.Error(err))
			}
		}
		old := j.OldClusterID
		if old == 0 && j.Snapshot == "" {
			old = j.ClusterID // --force-new-cluster keeps the cluster ID
		}
		rec := model.Recovered{ID: j.ID, Source: j.Source, OldClusterID: old, ClusterID: j.ClusterID, At: time.Now().UTC()}
		if err := a.putRecovered(ctx, rec); err != nil {
			return "recording the recovery in the recovered cluster", false, a.finishFailed(j, fmt.Errorf("recording the recovery in the recovered cluster: %w", err))
		}
	}
	j.Step = recovery.StepDone
	if err := a.saveRecovery(j); err != nil {
		return "journaling the end of the recovery", false, a.finishFailed(j, fmt.Errorf("journaling the end of the recovery: %w", err))
	}
	a.finishFailed(j, nil)
	a.metrics.Recoveries.WithLabelValues("done").Inc()
	return why, true, nil
}

// putRecovered writes the recovery record through the local member, which
// leads the recovered cluster: the loop's client asks the spec's other
// members, and until one of them has rejoined, those are stopped or, for
// a host that was away, an old member without a leader that would take
// the write and time out.
func (a *Agent) putRecovered(ctx context.Context, rec model.Recovered) error {
	s, self := a.Spec()
	cli, err := cluster.DialSpec(s, self, self.ClientURLs[:1])
	if err != nil {
		return err
	}
	defer cli.Close()
	return cli.PutRecovered(ctx, s.Cluster.Name, rec)
}

// finishFailed reports that the end of this host's part in recovery j
// cannot be recorded (err; nil: it was): logged when it starts and ends,
// shown in the status and the metric etcdkeeper_recovery_unfinished, for
// the alert. It returns err.
func (a *Agent) finishFailed(j recovery.Journal, err error) error {
	was := a.Status().RecoveryFinishError
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	a.updateStatus(func(s *Status) { s.RecoveryFinishError = msg })
	switch {
	case err != nil:
		a.metrics.RecoveryUnfinished.Set(1)
		if was == "" {
			a.lg.Error("the recovery cannot be finished: its record or journal cannot be written; the member serves, the journal stays open",
				zap.String("id", j.ID), zap.String("step", string(j.Step)), zap.Error(err))
		}
	case was != "":
		a.metrics.RecoveryUnfinished.Set(0)
		a.lg.Info("the recovery could be finished after all", zap.String("id", j.ID))
	}
	return err
}

// liveAnswer asks the local etcd for its status now, on a client of its
// own (the loop's belongs to the loop); false when it does not answer.
func (a *Agent) liveAnswer() (st *clientv3.StatusResponse, ok bool) {
	ok = a.askLocal(func(ctx context.Context, cli *cluster.Client, ep string) (err error) {
		st, err = cli.Status(ctx, ep)
		return err
	})
	return st, ok
}

// askLocal runs one call against the local etcd, when it runs, on a
// client of its own with the call deadline; false when it did not answer.
func (a *Agent) askLocal(call func(ctx context.Context, cli *cluster.Client, endpoint string) error) bool {
	s, self := a.Spec()
	if p := a.etcd.Process(); p == nil || !p.Running() {
		return false
	}
	cli, err := cluster.DialSpec(s, self, self.ClientURLs[:1])
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cluster.CallTimeout)
	defer cancel()
	return call(ctx, cli, self.ClientURLs[0]) == nil
}
