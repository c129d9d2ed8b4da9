package agent

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// onePass is observe → decide → act → report. It returns true when the
// step made progress that the next pass should follow at once.
func (a *Agent) onePass(ctx context.Context) bool {
	a.reload()
	a.redialOnNewCA()
	in, err := a.observe(ctx)
	if j := in.Local.OfflineDefrag; err == nil && j != nil && j.Request != "" && in.Request == nil {
		// Out for the operator's request (stopped, starting, catching
		// up), the member gives no view to read it with: read through the
		// others, so that this agent's record keeps saying it acts on it
		// (the command waits while an agent does).
		a.observeRequest(ctx, &in)
	}
	var act reconcile.Action
	said, again := "error observing", false
	if err == nil {
		// What the pass cannot record (a state dir that is full or
		// read-only) is reported (noteWrite), and held against the
		// decisions that need it; it never skips the decision and its
		// step: a learner is still promoted, the lock still given back.
		_ = a.record(ctx, in.Local.Answer)
		in.Local.StateDirError = a.Status().StateDirError
		a.observePause(ctx, &in)
		a.observeTurn(ctx, &in)
		act = reconcile.Decide(in)
		said, again, err = a.act(ctx, act, in)
		a.noteRequest(act, said, err)
		a.noteTurn(in, act, said, err)
		a.rollout = act.Rollout
		a.noteNoSpace(in, act)
		a.pushHistory(ctx, in)
		a.observeRotation(ctx, in)
	}
	if err != nil {
		a.releaseAfterError(ctx, act, err)
	}
	if err == nil && steady(act, in) {
		a.steadyPasses++
	} else {
		a.steadyPasses = 0
	}
	a.report(act, said, err)
	return again && err == nil
}

// noteRequest keeps where the pass left the operator's request, for the
// record the command follows: a step taken says what it did, one that
// failed or found the lock taken waits.
func (a *Agent) noteRequest(act reconcile.Action, said string, err error) {
	if act.Request == nil {
		a.request = nil
		return
	}
	p := *act.Request
	switch {
	case p.Phase != model.RequestActing:
	case err != nil:
		p.Phase, p.Text = model.RequestWaiting, said+": "+err.Error()
	case act.Kind == reconcile.DoTakeLock && (a.lock == nil || !a.lock.Held()):
		p.Phase, p.Text = model.RequestWaiting, said
	case act.Kind == reconcile.DoTakeLock, act.Kind == reconcile.DoWait, act.Kind == reconcile.DoNothing:
		// A wait that acts (an offline defragmentation's member catching
		// up) is no step of its own.
		p.Text = said
	default:
		p.Text = said
		if a.requestID == p.ID && len(a.requestSteps) < maxRequestSteps {
			a.requestSteps = append(a.requestSteps, said)
		}
	}
	p.Done, p.Steps = slices.Clone(a.requestDone), slices.Clone(a.requestSteps)
	a.request = &p
}

// maxRequestSteps bounds what a record keeps of one request's steps.
const maxRequestSteps = 32

// steady: nothing to do, and nothing that another pass soon would change:
// the local member and every member a healthy voter, no alarm, the
// cluster as the spec wants it.
func steady(act reconcile.Action, in reconcile.Input) bool {
	c := in.Cluster
	if act.Kind != reconcile.DoNothing || act.Request != nil || c == nil || len(c.Alarms) > 0 || in.Local.Recovery.Open() || in.Local.Journal.Open() {
		return false
	}
	for _, m := range c.Members {
		if !m.Healthy || m.IsLearner {
			return false
		}
	}
	return true
}

// report records the pass's outcome and logs the decision when its key
// changed: state changes, not heartbeats.
func (a *Agent) report(act reconcile.Action, said string, err error) {
	a.metrics.PassDone(err)
	key := act.Key
	if err != nil {
		said = said + ": " + err.Error()
		key = "error/" + act.Key + "/" + said
	}
	a.setDecision(said, err)
	if key == a.lastKey {
		return
	}
	a.lastKey = key
	if act.Start.RepairRefused {
		a.metrics.Repairs.WithLabelValues("refused").Inc() // once per refusal, not per pass
		a.remember(history.Event{Kind: "repair-refused", Reason: said})
	}
	f := []zap.Field{zap.String("decision", said), zap.String("action", act.Kind.String()), zap.String("key", act.Key)}
	if err != nil {
		a.lg.Warn("decision", f...)
		return
	}
	a.lg.Info("decision", f...)
}

// observe looks at the local member and, as far as the decision needs
// it, at the cluster: once per pass.
func (a *Agent) observe(ctx context.Context) (reconcile.Input, error) {
	s, self := a.Spec()
	in := reconcile.Input{Self: self, InSpec: a.inSpecNow(), Desired: s.Members, Generation: s.Generation,
		LearnerTimeout: s.Agent.LearnerTimeout.Duration, MaxDisrupted: s.Maintenance.MaxDisrupted, Defrag: reconcile.DefragPolicyOf(s.Maintenance.Defrag), NoSpace: reconcile.NoSpacePolicyOf(s)}
	// Reap first: an exited etcd must be noted even when the client
	// cannot be made (its Done channel would wake the loop at once).
	a.reapExit()
	if err := a.ensureClient(); err != nil {
		return in, err
	}
	a.resumeUpgrade(ctx)
	l := &in.Local
	l.Binary = a.observeBinary(ctx)
	l.Upgraded = a.upgraded()
	l.LockHeld = a.lock != nil && a.lock.Held()
	m := &in.Memory
	m.Compacted = a.compacted
	if a.defragmented == nil {
		a.defragmented = map[uint64]model.DefragMark{}
	}
	m.Defragmented = maps.Clone(a.defragmented)
	if a.noSpace.raised {
		m.NoSpaceFor = time.Since(a.noSpace.since)
	}
	if !a.lockReturned.IsZero() {
		m.LockReturned = time.Since(a.lockReturned)
	}
	l.LastExit = a.lastExit
	j, jerr := a.loadJournal()
	l.Journal = model.Journal{Step: string(j.Step), Class: j.Class}
	l.OfflineDefrag = a.observeOffline()
	rj, err := a.loadRecovery()
	if err != nil {
		return in, err
	}
	l.Recovery = recoveryOf(rj)
	if rj.Step != "" {
		a.updateStatus(func(s *Status) { s.Recovery = &rj })
	}
	if a.etcd.Running() {
		l.Running = true
		if l.Recovery.Fenced() {
			if l.Marker, err = a.loadMarker(); err != nil {
				return in, err
			}
		}
		a.observeRunning(ctx, &in)
		l.LeaderlessFor = a.leaderlessFor(l.Answer)
		return in, nil
	}
	if l.RestartIn = a.etcd.RestartIn(); l.RestartIn > 0 {
		return in, nil
	}
	return in, a.observeStopped(ctx, &in, j, jerr)
}

// observeRunning asks the local etcd for its status and, for a healthy
// voter (or an etcd silent for too long), observes the cluster.
func (a *Agent) observeRunning(ctx context.Context, in *reconcile.Input) {
	s, self := a.Spec()
	l := &in.Local
	if p := a.etcd.Process(); p != nil {
		p.NoteCgroup()
	}
	st, err := a.localStatus(ctx, self.ClientURLs[0])
	if err != nil {
		a.updateStatus(func(s *Status) { s.Healthy = false })
		a.metrics.MemberHealthy.Set(0)
		// Silent is not stuck while a snapshot arrives: a new member
		// receiving a large one answers nothing for minutes. Only the snap
		// dir counts (WAL segments also grow on a member that is stuck),
		// and never for longer than ten deadlines in all.
		started := a.etcd.Process().Started()
		if a.silentFirst.IsZero() || a.silentFirst.Before(started) {
			a.silentFirst, a.silentSince, a.silentBytes = time.Now(), time.Now(), SnapBytes(self.DataDir)
		}
		if b := SnapBytes(self.DataDir); b != a.silentBytes && time.Since(a.silentFirst) < 10*reconcile.ReadyDeadline {
			a.silentSince, a.silentBytes = time.Now(), b
		}
		l.SilentFor = time.Since(a.silentSince)
		l.HandshakeRefused = cluster.HandshakeRefused(err)
		a.observeStill(l, self.DataDir)
		if reconcile.SilentTooLong(*l) {
			in.Cluster = a.observeCluster(ctx)
			l.DefragmentedBy = a.defragmentedBy(ctx)
		}
		a.observeStall(ctx, l)
		return
	}
	a.silentSince, a.silentFirst, a.stallRestarts = time.Time{}, time.Time{}, 0
	a.still.Reset()
	l.Answer = &model.Answer{MemberID: st.Header.MemberId, ClusterID: st.Header.ClusterId, Leader: st.Leader, IsLearner: st.IsLearner, Applied: st.RaftAppliedIndex, Revision: st.Header.Revision}
	a.updateStatus(func(s *Status) { s.RaftTerm, s.RaftIndex, s.Revision = st.RaftTerm, st.RaftIndex, st.Header.Revision })
	if len(st.Errors) > 0 && st.Leader != 0 {
		// The status lists the active alarms as text; AlarmList says,
		// typed, which member each names (it needs a leader: without one
		// it would only wait out its deadline).
		if l.Answer.Alarms, err = a.client.Alarms(ctx); err != nil {
			a.lg.Debug("alarm list", zap.Error(err))
		}
	}
	l.Restart, l.WantEtcd = a.restartDue(s, self)
	l.Restart = binaryRestart(l.Restart, l.Binary, a.etcd.Process().Adoptable())
	in.Memory.Restarted, in.Memory.RolloutSnapshot = a.restarted, a.rolloutSnapshot
	a.restartPending, a.restartAgent = l.Restart.Why, l.Restart.Agent
	a.noteAnswer(*l.Answer)
	a.measureDisk(ctx, self.ClientURLs[0])
	l.LeaderlessFor = a.leaderlessFor(l.Answer)
	if st.Leader == 0 && l.LeaderlessFor >= reconcile.NoLeaderLook && !l.Journal.Open() && !l.Recovery.Open() {
		a.observeAway(ctx, in)
		return
	}
	if st.Leader == 0 || st.IsLearner || l.Journal.Open() {
		return
	}
	in.Cluster = a.observeCluster(ctx)
	if in.Cluster == nil {
		return
	}
	// The agents' records: their specs, progress and pending restarts
	// for a membership change or a rolling restart; who is alive under
	// NOSPACE; their disks and leader moves for the leader placement.
	if recs, err := a.client.Agents(ctx, s.Cluster.Name); err == nil {
		in.Agents = recs
		a.noteDisks(model.NewView(*in.Cluster, recs))
	}
	if in.Cluster.LeaderMoved, err = a.client.GetLeaderMoved(ctx, s.Cluster.Name); err != nil {
		// Not known is taken as a move just made: the placement waits.
		in.Cluster.LeaderMoved = &model.LeaderMoved{Why: "the agents' last leader move cannot be read: " + err.Error()}
	}
	if !l.LockHeld && reconcile.NoSpaceRaised(*in.Cluster) {
		// A lock taken before NOSPACE is kept by its holder's keepalives;
		// the procedure's unlocked steps wait for it (G3). Not known is
		// taken as held: the unlocked step waits a pass.
		taken, err := a.client.LockTaken(ctx, s.Cluster.Name)
		l.LockHeldElsewhere = taken || err != nil
	}
	a.observeRequest(ctx, in)
	a.pending.Stamp(in.Cluster, progressOf(in.Agents))
	rollout := ""
	if in.Agents != nil {
		rollout = reconcile.RolloutText(*in.Cluster, in.Agents)
	}
	a.updateStatus(func(s *Status) { s.Rollout = rollout })
}

// observeRequest reads the operator's request (etcdkeeper defrag --yes,
// leader move), and the agents' records it is decided on.
func (a *Agent) observeRequest(ctx context.Context, in *reconcile.Input) {
	s, _ := a.Spec()
	r, err := a.client.GetRequest(ctx, s.Cluster.Name)
	if err != nil {
		a.lg.Debug("reading the operator's request", zap.Error(err))
		return
	}
	if in.Request = r; r == nil {
		return
	}
	if a.requestID != r.ID {
		a.requestID, a.requestDone, a.requestSteps = r.ID, nil, nil
	}
	in.Memory.RequestDone = slices.Clone(a.requestDone)
	if in.Agents == nil {
		if recs, err := a.client.Agents(ctx, s.Cluster.Name); err == nil {
			in.Agents = recs
		}
	}
}

// observeAway looks at the cluster through the spec's other members for a
// member that has had no leader for long (reconcile.NoLeaderLook): a
// cluster recovered while this host was away answers there under another
// ID, and its recovery record tells whether it replaced this member's.
func (a *Agent) observeAway(ctx context.Context, in *reconcile.Input) {
	// Without a quorum the member list waits out its deadline: once in a
	// while, not every pass.
	if time.Since(a.awayLooked) < awayEvery || !cluster.AnyListening(ctx, a.peerURLs()) {
		return
	}
	a.awayLooked = time.Now()
	c := a.observeCluster(ctx)
	if c == nil || !foreign(in.Local.Answer.ClusterID, c.ClusterID) {
		in.Cluster = c
		return
	}
	s, _ := a.Spec()
	var err error
	if c.Recovered, err = a.client.GetRecovered(ctx, s.Cluster.Name); err != nil {
		a.lg.Debug("recovery record", zap.Error(err))
	}
	in.Cluster = c
}

// awayEvery is how often observeAway looks.
const awayEvery = 10 * time.Second

// observeStopped gathers what the start decision needs: the data dir, the
// marker, the repair guards, and the live cluster if any peer answers.
func (a *Agent) observeStopped(ctx context.Context, in *reconcile.Input, j repair.Journal, journalErr error) error {
	_, self := a.Spec()
	l := &in.Local
	// The data dir's check (a child process) and the look at the cluster
	// are independent: both at once, so a repair starts sooner.
	inspected := make(chan struct{})
	if dev := deviceOf(self.DataDir); a.data == nil || time.Since(a.dataAt) > dataFresh || dev != a.dataDev {
		go func() {
			defer close(inspected)
			d := a.inspect(ctx)
			a.data, a.dataAt, a.dataDev = &d, time.Now(), dev
		}()
	} else {
		close(inspected)
	}
	look := func() (listening bool) {
		in.Cluster = nil
		if !cluster.AnyListening(ctx, a.peerURLs()) {
			return false
		}
		in.Cluster = a.observeCluster(ctx)
		return true
	}
	looked := time.Now()
	listening := look()
	<-inspected
	if time.Since(looked) > staleView {
		// A long check (a multi-GB db): decide on a fresh look.
		listening = look()
	}
	l.Data = *a.data
	if s := a.loadSuspect(l.Data.MemberID); s != nil && (l.LastExit == nil || !l.LastExit.Corrupt) {
		l.LastExit = &model.Exit{Text: "stopped for repair", Class: repair.ClassCorrupt.String(), Reason: s.Reason, Corrupt: true}
	}
	marker, err := a.loadMarker()
	if err != nil {
		return err
	}
	l.Marker = marker
	if l.Data.Kind == model.DataEmpty {
		l.DataUnmounted = unmounted(self.DataDir, marker)
	}
	l.RepairBlocked = a.repairBlocked(j, journalErr)
	l.AddBlocked = a.addBlocked(j, journalErr)
	if !listening {
		// Nobody listens on any peer's client or peer port: no cluster to
		// observe, and no call needs to wait out its deadline.
		return nil
	}
	if c := in.Cluster; c != nil && !l.Recovery.Open() && (foreign(l.Data.ClusterID, c.ClusterID) || (marker != nil && foreign(marker.ClusterID, c.ClusterID))) {
		// This host's data is another cluster's: was the cluster recovered
		// while it was away?
		s, _ := a.Spec()
		if c.Recovered, err = a.client.GetRecovered(ctx, s.Cluster.Name); err != nil {
			a.lg.Debug("recovery record", zap.Error(err))
		}
	}
	if in.Cluster == nil && l.Data.Kind == model.DataEmpty {
		// Only an empty data dir may lead to forming a new cluster: make
		// sure nobody is there before that.
		in.PeerAnswered = a.client.AnyPeerAnswers(ctx, a.peerEndpoints())
		if in.PeerAnswered == "" {
			in.PeerAnswered = cluster.ClusterWithout(ctx, self, a.peers())
		}
	}
	return nil
}

// staleView is how old the look at the cluster taken while the data dir
// was checked may be when the decision is made.
const staleView = time.Second

// foreign: a recorded cluster ID (0: none) that is not the live one.
func foreign(recorded, live uint64) bool { return recorded != 0 && recorded != live }

// observeCluster observes the live cluster (nil when it does not answer
// with a leader) and records it for status and metrics.
func (a *Agent) observeCluster(ctx context.Context) *model.Cluster {
	v, err := a.client.Observe(ctx)
	if err != nil {
		return nil
	}
	a.down.Stamp(&v)
	a.noteView(v)
	return &v
}

// dataFresh is how long an inspection of the data dir stands for it while
// etcd is not running: the passes of one decision (take the lock, then
// rejoin) share it; later ones look again (an operator may have fixed
// permissions, or mounted the disk).
const dataFresh = 10 * time.Second

// progressOf is what each agent reports of its member catching up, by
// member ID.
func progressOf(recs []model.AgentRecord) map[uint64]string {
	out := map[uint64]string{}
	for _, r := range recs {
		if r.MemberID != 0 {
			out[r.MemberID] = r.Progress
		}
	}
	return out
}

// reapExit classifies how etcd ended, once, and schedules the next start.
func (a *Agent) reapExit() {
	e, ok := a.etcd.Reap()
	if !ok {
		return
	}
	v := repair.Classify(repair.Exit{Code: e.Code, Signal: e.Signal, Tail: e.Tail, OOM: e.OOM})
	if e.OOM {
		a.metrics.OOMKills.Inc()
		a.remember(history.Event{Kind: "oom-kill", Reason: v.Reason, Detail: map[string]string{"cgroup": e.MemCgroup, "uptime": e.Uptime.Round(time.Second).String()}})
	}
	a.noteExit(e.String(), e.Uptime, v, false)
}

// noteExit records an exit of etcd with its classification and schedules
// the next start: at once for corruption and removal (the start decision
// handles them), after the backoff otherwise, or at once when stopped
// on purpose.
func (a *Agent) noteExit(exit string, uptime time.Duration, v repair.Verdict, onPurpose bool) {
	a.data = nil
	a.lastExit = &model.Exit{Text: exit, Class: v.Class.String(), Reason: v.Reason, Corrupt: v.Class == repair.ClassCorrupt}
	if v.Class == repair.ClassCorrupt && !onPurpose {
		// etcd's verdict, kept on disk: an agent restarted before the repair
		// moved the data must not start it as it is (the offline check may
		// not see what etcd saw).
		if m, err := a.loadMarker(); err == nil && m != nil {
			if err := a.saveSuspect(suspect{MemberID: m.MemberID, Reason: v.Reason}); err != nil {
				a.lg.Error("recording etcd's corruption verdict", zap.Error(err))
			}
		}
	}
	now := onPurpose || v.Class == repair.ClassCorrupt || v.Class == repair.ClassRemoved
	delay := a.etcd.ScheduleRestart(now)
	a.metrics.EtcdRestarts.WithLabelValues(v.Class.String()).Inc()
	a.metrics.MemberHealthy.Set(0)
	a.metrics.SetRole("none")
	a.lg.Warn("etcd exited", zap.String("exit", exit), zap.Duration("uptime", uptime.Round(time.Millisecond)),
		zap.Stringer("class", v.Class), zap.String("reason", v.Reason), zap.String("evidence", v.Evidence),
		zap.Duration("restart-in", delay.Round(time.Millisecond)))
	a.updateStatus(func(s *Status) {
		s.EtcdPID = 0
		s.Healthy = false
		s.Restarts++
		s.LastExit = exit
		s.LastExitClass = v.Class.String()
	})
}

// repairBlocked says why moving data is not allowed now, or "".
// j is the journal this pass read (journalErr: why it could not be).
func (a *Agent) repairBlocked(j repair.Journal, journalErr error) string {
	s, _ := a.Spec()
	if s.Repair.Enabled != nil && !*s.Repair.Enabled {
		return "repair is disabled in the spec (repair.enabled: false)"
	}
	if journalErr != nil {
		return journalErr.Error()
	}
	if j.Open() {
		return "" // a repair under way is resumed, not counted again
	}
	if repair.RateLimited(j.Attempts, time.Now(), s.Repair.MaxPerHour) {
		return fmt.Sprintf("rate limit: %d repairs in the last hour (repair.maxPerHour)", s.Repair.MaxPerHour)
	}
	return ""
}

// addBlocked says why this host may not be added again now, or "": every
// add of the last hour counts toward repair.maxPerHour, whatever the
// journal's state.
func (a *Agent) addBlocked(j repair.Journal, journalErr error) string {
	s, _ := a.Spec()
	if journalErr != nil {
		return journalErr.Error()
	}
	if repair.RateLimited(j.Attempts, time.Now(), s.Repair.MaxPerHour) {
		return fmt.Sprintf("rate limit: %d adds in the last hour (repair.maxPerHour)", s.Repair.MaxPerHour)
	}
	return ""
}

func (a *Agent) inSpecNow() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inSpec
}

// dataBytes is how many bytes the member's data dir holds: while a
// snapshot arrives, it grows.
func dataBytes(dir string) int64 { return dirBytes(filepath.Join(dir, "member")) }

// SnapBytes is how many bytes the member's snap dir under data dir dir
// holds: it grows while a snapshot from the leader arrives, and while a
// defragmentation writes its copy (db.tmp.*). The silent-member rule
// resets on a change of it; the bench samples it.
func SnapBytes(dir string) int64 { return dirBytes(filepath.Join(dir, "member", "snap")) }

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
