package backup

import (
	"context"
	"errors"
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
}

// Scheduler takes this agent's scheduled snapshots in its own goroutine,
// with its own timer: the reconcile loop never waits for a snapshot.
type Scheduler struct {
	cfg Config
	lg  *zap.Logger

	mu    sync.Mutex
	state State

	// Owned by Run's goroutine.
	lastOK, lastFail, lastCheck time.Time
	failures                    int
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
		s.update(func(st *State) {
			st.Enabled, st.Dir, st.Interval = interval > 0, self.SnapshotDir, sp.Backup.Interval.String()
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
		s.runOnce(ctx, sp, self)
	}
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
func (s *Scheduler) runOnce(ctx context.Context, sp *spec.Spec, self spec.Member) {
	s.update(func(st *State) { st.Busy = "snapshot" })
	defer s.update(func(st *State) { st.Busy = "" })
	e, err := s.take(ctx, sp, self)
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
	s.lg.Info("snapshot saved", zap.String("file", e.Path()), zap.Int64("revision", e.Revision),
		zap.Int("keys", e.Sidecar.Verification.TotalKey), zap.Int64("bytes", e.Size),
		zap.Float64("seconds", e.Sidecar.Seconds), zap.String("source", e.Sidecar.Source.Name+" ("+e.Sidecar.Source.Role+")"))
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
	if restoreCheckDue(time.Now(), s.lastCheck, sp.Backup.Interval.Duration) {
		s.update(func(st *State) { st.Busy = "restore-check" })
		s.restoreCheck(ctx, sp, self, e.ClusterID())
	}
}

func (s *Scheduler) take(ctx context.Context, sp *spec.Spec, self spec.Member) (Entry, error) {
	var eps []string
	for _, m := range sp.Members {
		eps = append(eps, m.ClientURLs...)
	}
	client, err := cluster.DialSpec(sp, self, eps)
	if err != nil {
		return Entry{}, err
	}
	defer client.Close()
	t := Taker{Client: client, Cluster: sp.Cluster.Name, Member: self.Name, Dir: self.SnapshotDir, By: BySchedule, Now: s.cfg.Now}
	return t.Take(ctx)
}

func (s *Scheduler) restoreCheck(ctx context.Context, sp *spec.Spec, self spec.Member, clusterID string) {
	entries, err := List(self.SnapshotDir, sp.Cluster.Name)
	e, ok := NewestVerified(entries, clusterID)
	if err != nil || !ok {
		s.fail(&StageError{StageRestoreCheck, errors.Join(errors.New("no verified snapshot to restore"), err)})
		return
	}
	rc := CheckRestore(ctx, e)
	if ctx.Err() != nil {
		return
	}
	s.lastCheck = time.Now()
	s.update(func(st *State) { st.LastRestoreCheck = &rc })
	result := "ok"
	if !rc.OK {
		result = "failed"
	}
	if m := s.cfg.Metrics; m != nil {
		m.RestoreChecks.WithLabelValues(result).Inc()
	}
	if !rc.OK {
		s.fail(&StageError{StageRestoreCheck, errors.New(e.File + ": " + rc.Error)})
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
