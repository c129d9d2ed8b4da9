package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Config is how an agent runs its schedule.
type Config struct {
	// Spec is the spec in force and this agent's member; it follows
	// reloads (backup.interval 0 pauses the schedule).
	Spec    func() (*spec.Spec, spec.Member)
	Logger  *zap.Logger
	Metrics *metrics.Backup
	// Now is the wall clock for names and sidecars (tests set it back and
	// forth); the schedule itself waits on monotonic timers.
	Now func() time.Time
}

// State is the schedule as /status shows it.
type State struct {
	Enabled          bool          `json:"enabled"`
	Dir              string        `json:"dir,omitempty"`
	Interval         string        `json:"interval,omitempty"`
	Busy             string        `json:"busy,omitempty"`
	NextRun          time.Time     `json:"nextRun,omitzero"`
	LastSuccess      time.Time     `json:"lastSuccess,omitzero"`
	LastFile         string        `json:"lastFile,omitempty"`
	LastRevision     int64         `json:"lastRevision,omitempty"`
	LastSize         int64         `json:"lastSize,omitempty"`
	LastSeconds      float64       `json:"lastSeconds,omitempty"`
	FailuresInARow   int           `json:"failuresInARow"`
	LastError        string        `json:"lastError,omitempty"`
	LastRestoreCheck *RestoreCheck `json:"lastRestoreCheck,omitempty"`
	// Encryption says who can read new snapshots and whether this host
	// can restore them (Keys.Describe).
	Encryption string `json:"encryption,omitempty"`
	// The restore drill: the last one, and when the next is due.
	DrillInterval string    `json:"drillInterval,omitempty"`
	NextDrill     time.Time `json:"nextDrill,omitzero"`
	LastDrill     *Drill    `json:"lastDrill,omitempty"`
}

// Scheduler takes this agent's scheduled snapshots in its own goroutine,
// with its own timer: the reconcile loop never waits for a snapshot.
type Scheduler struct {
	cfg Config
	lg  *zap.Logger

	mu    sync.Mutex
	state State

	// Owned by Run's goroutine.
	lastOK, lastFail, lastCheck, lastDrill time.Time
	failures                               int
	keysSaid                               string
}

// startDelay: the first snapshot of a run waits this long (at most an
// interval), so that a starting member can become healthy first.
const startDelay = 10 * time.Second

// recheck bounds each wait, so that a spec reload (interval, dir) takes
// effect without a wake-up.
const recheck = 30 * time.Second

// NewScheduler prepares a schedule; Run runs it.
func NewScheduler(cfg Config) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{cfg: cfg, lg: cfg.Logger}
}

// State returns a copy of the schedule's state.
func (s *Scheduler) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	if st.LastRestoreCheck != nil {
		rc := *st.LastRestoreCheck
		st.LastRestoreCheck = &rc
	}
	if st.LastDrill != nil {
		d := *st.LastDrill
		st.LastDrill = &d
	}
	return st
}

func (s *Scheduler) update(f func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.state)
}

// Run runs the schedule until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	started := time.Now()
	sp, self := s.cfg.Spec()
	s.loadNewest(sp, self, started)
	for ctx.Err() == nil {
		sp, self = s.cfg.Spec()
		interval := sp.Backup.Interval.Duration
		if m := s.cfg.Metrics; m != nil {
			m.Interval.Set(interval.Seconds())
		}
		k := s.keys(sp)
		s.update(func(st *State) {
			st.Enabled, st.Dir, st.Interval = interval > 0, self.SnapshotDir, sp.Backup.Interval.String()
			st.Encryption, st.DrillInterval = k.Describe(), sp.Backup.DrillInterval.String()
			if d := sp.Backup.DrillInterval.Duration; d > 0 && !s.lastDrill.IsZero() {
				st.NextDrill = s.lastDrill.Add(d)
			} else {
				st.NextDrill = time.Time{}
			}
		})
		if interval <= 0 {
			s.update(func(st *State) { st.NextRun = time.Time{} })
			sleep(ctx, recheck)
			continue
		}
		now := time.Now()
		next := NextRun(now, s.lastOK, s.lastFail, s.failures, interval)
		if first := started.Add(min(interval, startDelay)); next.Before(first) {
			next = first
		}
		s.update(func(st *State) { st.NextRun = next })
		if wait := next.Sub(now); wait > 0 {
			sleep(ctx, min(wait, recheck))
			continue // look again: the spec may have changed meanwhile
		}
		s.runOnce(ctx, sp, self, k)
	}
}

// keys reads backup.encryption on this host (each pass: a new identity
// file, or its mode fixed, counts at once), sets the metrics, and logs
// what they do when that changes.
func (s *Scheduler) keys(sp *spec.Spec) Keys {
	// An error is in k.Refused: said below when it changes, and every
	// snapshot refused with it.
	k, _ := KeysFor(sp.Backup.Encryption)
	if m := s.cfg.Metrics; m != nil {
		m.Encrypted.Set(b2f(sp.Backup.Encryption.Encrypts()))
		m.PlaintextUnacknowledged.Set(b2f(k.Unacknowledged))
		m.DrillInterval.Set(sp.Backup.DrillInterval.Seconds())
	}
	if said := k.Describe(); said != s.keysSaid {
		s.keysSaid = said
		switch {
		case k.Refused != nil:
			s.lg.Error("snapshot encryption: the recipients cannot be read: no snapshot is taken until they can", zap.String("encryption", said))
		case k.Unacknowledged:
			s.lg.Warn("snapshots are PLAINTEXT: the spec gives no backup.encryption.recipients (the whole keyspace is readable in every snapshot file and object); add recipients, or say backup.encryption.plaintext: true", zap.String("encryption", said))
		case k.Encrypts() && !k.CanRead() && !errors.Is(k.NoIdentity, spec.ErrNoIdentity):
			s.lg.Warn("snapshot encryption: the identity file is refused: restore checks and drills cannot decrypt", zap.String("encryption", said))
		default:
			s.lg.Info("snapshot encryption", zap.String("encryption", said))
		}
	}
	return k
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// loadNewest takes this agent's newest scheduled snapshot on disk as the
// last success, so that a restarted agent keeps its schedule and its
// metrics. The cluster ID is not known yet: only a snapshot of this
// agent's own schedule, in a dir no other user can write to, intact,
// counts; a time it claims past the start is taken as the start.
func (s *Scheduler) loadNewest(sp *spec.Spec, self spec.Member, started time.Time) {
	m := s.cfg.Metrics
	if m != nil {
		m.LastSuccess.Set(float64(started.Unix()))
	}
	if err := CheckDir(self.SnapshotDir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.lg.Warn("backup dir refused", zap.Error(err))
		}
		return
	}
	entries, err := List(self.SnapshotDir, sp.Cluster.Name)
	if err != nil {
		s.lg.Warn("backup dir", zap.Error(err))
	}
	e, ok := newestOwn(entries, Owner{Cluster: sp.Cluster.Name, Member: self.Name})
	if !ok {
		return
	}
	s.lastOK = e.Sidecar.TakenAt
	if s.lastOK.After(started) {
		s.lastOK = started
	}
	s.noteSuccess(e)
}

// newestOwn is the newest intact snapshot owner's schedule wrote, of any
// cluster ID.
func newestOwn(entries []Entry, owner Owner) (Entry, bool) {
	for _, e := range sorted(entries) {
		if sc := e.Sidecar; e.Verified() && e.Distrust == "" && sc.Writer == writer && sc.By == BySchedule &&
			sc.Cluster == owner.Cluster && sc.Member == owner.Member && Intact(e) {
			return e, true
		}
	}
	return Entry{}, false
}

func (s *Scheduler) noteSuccess(e Entry) {
	sc := e.Sidecar
	if m := s.cfg.Metrics; m != nil {
		m.LastSuccess.Set(float64(sc.TakenAt.UnixNano()) / 1e9)
		m.LastSize.Set(float64(sc.Size))
		m.LastDuration.Set(sc.Seconds)
	}
	s.update(func(st *State) {
		st.LastSuccess, st.LastFile, st.LastRevision, st.LastSize, st.LastSeconds = sc.TakenAt, e.File, e.Revision, sc.Size, sc.Seconds
		if sc.RestoreCheck != nil {
			st.LastRestoreCheck = sc.RestoreCheck
		}
	})
}

// runOnce takes one snapshot, then uploads it, applies retention and,
// when due, checks that the newest restores.
func (s *Scheduler) runOnce(ctx context.Context, sp *spec.Spec, self spec.Member, k Keys) {
	s.update(func(st *State) { st.Busy = "snapshot" })
	defer s.update(func(st *State) { st.Busy = "" })
	e, err := s.take(ctx, sp, self, k)
	if ctx.Err() != nil {
		return // stopping: not a failure
	}
	if err != nil {
		s.lastFail = time.Now()
		s.failures++
		s.fail(err)
		return
	}
	s.lastOK, s.failures = time.Now(), 0
	s.noteSuccess(e)
	s.update(func(st *State) { st.FailuresInARow, st.LastError = 0, "" })
	saved := s.lg.Info
	if k.Unacknowledged {
		saved = s.lg.Warn // every plaintext snapshot the spec did not ask for says so
	}
	saved("snapshot saved", zap.String("file", e.Path()), zap.Int64("revision", e.Revision),
		zap.Int("keys", e.Sidecar.Verification.TotalKey), zap.Int64("bytes", e.Size),
		zap.Float64("seconds", e.Sidecar.Seconds), zap.String("source", e.Sidecar.Source.Name+" ("+e.Sidecar.Source.Role+")"),
		zap.String("encryption", encryptionOf(e.Sidecar)))
	if sp.Backup.S3.Enabled() {
		s.update(func(st *State) { st.Busy = "upload" })
		if where, err := Upload(ctx, sp.Backup.S3, e); err != nil {
			s.fail(&StageError{StageUpload, err})
		} else {
			s.lg.Info("snapshot uploaded", zap.String("file", e.File), zap.String("to", where))
		}
	}
	s.update(func(st *State) { st.Busy = "retention" })
	removed, err := RemovePruned(self.SnapshotDir, Owner{Cluster: sp.Cluster.Name, Member: self.Name, ClusterID: e.ClusterID()}, sp.Backup.Keep)
	for _, f := range removed {
		s.lg.Info("snapshot removed: older than the newest backup.keep", zap.String("file", f), zap.Int("keep", sp.Backup.Keep))
	}
	if m := s.cfg.Metrics; m != nil {
		m.Removed.Add(float64(len(removed)))
	}
	if err != nil {
		s.fail(&StageError{StageRetention, err})
	}
	// A drill of a local snapshot is its restore check; after a drill
	// from S3 (or a failed one), the local newest is checked on its own.
	drilled := false
	if drillDue(time.Now(), s.lastDrill, sp.Backup.DrillInterval.Duration) && (k.CanRead() || !k.Encrypts()) {
		s.update(func(st *State) { st.Busy = "restore-drill" })
		drilled = s.drill(ctx, sp, self, k, e.ClusterID())
	}
	if !drilled && restoreCheckDue(time.Now(), s.lastCheck, sp.Backup.Interval.Duration) {
		s.update(func(st *State) { st.Busy = "restore-check" })
		s.restoreCheck(ctx, sp, self, e.ClusterID(), k)
	}
}

// encryptionOf says how a snapshot is encrypted, for logs.
func encryptionOf(sc *Sidecar) string {
	if sc == nil || sc.Encryption == nil {
		return "none (plaintext)"
	}
	return fmt.Sprintf("%s to %d recipient(s)", sc.Encryption.Format, len(sc.Encryption.Recipients))
}

// drill runs one restore drill; true when it was the restore check of
// this host's newest snapshot (a local drill that passed).
func (s *Scheduler) drill(ctx context.Context, sp *spec.Spec, self spec.Member, k Keys, clusterID string) bool {
	d := RunDrill(ctx, DrillPlan{Cluster: sp.Cluster.Name, ClusterID: clusterID, Dir: self.SnapshotDir, S3: sp.Backup.S3, Keys: k})
	if ctx.Err() != nil {
		return false
	}
	s.lastDrill = time.Now()
	if d.RestoreCheck != nil {
		s.lastCheck = s.lastDrill
	}
	s.update(func(st *State) {
		st.LastDrill = &d
		st.NextDrill = s.lastDrill.Add(sp.Backup.DrillInterval.Duration)
		if d.RestoreCheck != nil {
			st.LastRestoreCheck = d.RestoreCheck
		}
	})
	if m := s.cfg.Metrics; m != nil && d.RestoreCheck != nil {
		m.RestoreChecks.WithLabelValues("ok").Inc()
	}
	if m := s.cfg.Metrics; m != nil {
		m.DrillLastFailed.Set(b2f(!d.OK))
		if d.OK {
			m.DrillSeconds.Set(d.Seconds)
			m.DrillBytes.Set(float64(d.Bytes))
			m.DrillLastSuccess.Set(float64(d.At.UnixNano()) / 1e9)
			for step, v := range map[string]float64{"download": d.Steps.Download, "decrypt": d.Steps.Decrypt, "verify": d.Steps.Verify, "restore": d.Steps.Restore} {
				m.DrillStepSeconds.WithLabelValues(step).Set(v)
			}
		} else {
			m.DrillFailures.Inc()
		}
	}
	if !d.OK {
		s.lg.Warn("restore drill failed", zap.String("source", d.Source), zap.String("error", d.Error), zap.Float64("seconds", d.Seconds))
		return false
	}
	s.lg.Info("restore drill passed", zap.String("source", d.Source), zap.Bool("encrypted", d.Encrypted), zap.Int64("bytes", d.Bytes),
		zap.Float64("seconds", d.Seconds), zap.Float64("download", d.Steps.Download), zap.Float64("decrypt", d.Steps.Decrypt),
		zap.Float64("verify", d.Steps.Verify), zap.Float64("restore", d.Steps.Restore), zap.Int64("revision", d.Revision), zap.Int64("keys", d.Keys))
	return d.RestoreCheck != nil
}

func (s *Scheduler) take(ctx context.Context, sp *spec.Spec, self spec.Member, k Keys) (Entry, error) {
	var eps []string
	for _, m := range sp.Members {
		eps = append(eps, m.ClientURLs...)
	}
	client, err := cluster.DialSpec(sp, self, eps)
	if err != nil {
		return Entry{}, err
	}
	defer client.Close()
	t := Taker{Client: client, Cluster: sp.Cluster.Name, Member: self.Name, Dir: self.SnapshotDir, By: BySchedule, Now: s.cfg.Now,
		Keys: k}
	return t.Take(ctx)
}

func (s *Scheduler) restoreCheck(ctx context.Context, sp *spec.Spec, self spec.Member, clusterID string, k Keys) {
	entries, err := List(self.SnapshotDir, sp.Cluster.Name)
	e, ok := NewestVerified(entries, clusterID)
	if err != nil || !ok {
		s.fail(&StageError{StageRestoreCheck, errors.Join(errors.New("no verified snapshot to restore"), err)})
		return
	}
	rc := CheckRestore(ctx, e, k)
	if ctx.Err() != nil {
		return
	}
	s.lastCheck = time.Now()
	s.update(func(st *State) { st.LastRestoreCheck = &rc })
	result := "ok"
	switch {
	case !rc.OK:
		result = "failed"
	case rc.Checked == CheckedSHA256:
		result = "ciphertext-only"
	case rc.Checked == CheckedDecrypt:
		result = "decrypt-only"
	}
	if m := s.cfg.Metrics; m != nil {
		m.RestoreChecks.WithLabelValues(result).Inc()
	}
	if !rc.OK {
		s.fail(&StageError{StageRestoreCheck, errors.New(e.File + ": " + rc.Error)})
		return
	}
	if rc.Checked == CheckedSHA256 {
		s.lg.Info("snapshot's ciphertext sha256 checked: this host has no identity to restore it with", zap.String("file", e.File), zap.Float64("seconds", rc.Seconds))
		return
	}
	if rc.Checked == CheckedDecrypt {
		s.lg.Warn("snapshot decrypted and compared, not restored", zap.String("file", e.File), zap.String("why", rc.Note), zap.Float64("seconds", rc.Seconds))
		return
	}
	s.lg.Info("snapshot restored and compared", zap.String("file", e.File), zap.Int64("revision", rc.Revision),
		zap.Int64("keys", rc.Keys), zap.Float64("seconds", rc.Seconds))
}

func (s *Scheduler) fail(err error) {
	stage := StageOf(err)
	if m := s.cfg.Metrics; m != nil {
		m.Failures.WithLabelValues(string(stage)).Inc()
	}
	s.update(func(st *State) { st.FailuresInARow, st.LastError = s.failures, err.Error() })
	s.lg.Warn("scheduled snapshot: "+string(stage)+" failed", zap.Error(err), zap.Int("failures-in-a-row", s.failures))
}
