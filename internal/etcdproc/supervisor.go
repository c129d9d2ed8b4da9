package etcdproc

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// StableUptime is how long etcd must run for the restart backoff to reset.
const StableUptime = time.Minute

// Supervisor runs the local etcd, one process at a time: it starts it
// (recording its PID for a successor agent), notices its exit, and
// schedules the next start with an exponential backoff. What an exit
// means is for the caller to classify; the supervisor only needs to know
// whether to restart at once.
type Supervisor struct {
	lg      *zap.Logger
	pidFile string
	stop    time.Duration

	proc      *Process
	backoff   Backoff
	nextStart time.Time
	// last is the command the running (or last) etcd was started with.
	last Command

	// Publish are the callbacks of each process's publish watch (etcd's
	// publish stall, see Process.LostPublishRace; its publish); set them
	// before the first Start.
	Publish PublishHooks
}

// NewSupervisor supervises the etcd whose PID is kept in pidFile; stop is
// how long a graceful stop may take before SIGKILL.
func NewSupervisor(lg *zap.Logger, pidFile string, stop time.Duration) *Supervisor {
	return &Supervisor{lg: lg, pidFile: pidFile, stop: stop, backoff: Backoff{Base: time.Second, Max: 30 * time.Second}}
}

// StopLeftover stops an etcd of this member left behind by a previous
// agent (see the package-level StopLeftover).
func (s *Supervisor) StopLeftover(dataDir string) (int, error) {
	return StopLeftover(s.pidFile, dataDir, s.stop)
}

// Start starts etcd with c, creating dataDir first and removing the
// temporaries of a defragmentation cut short (RemoveDefragTemps).
func (s *Supervisor) Start(c Command, dataDir string) (*Process, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := RemoveDefragTemps(s.lg, dataDir); err != nil {
		s.lg.Warn("defragmentation temporaries", zap.Error(err))
	}
	p, err := start(s.lg, c, s.Publish)
	if err != nil {
		return nil, err
	}
	s.proc, s.last = p, c
	if err := os.MkdirAll(filepath.Dir(s.pidFile), 0o700); err == nil {
		if err := WritePIDFile(s.pidFile, p.PID()); err != nil {
			s.lg.Warn("pid file", zap.Error(err))
		}
	}
	return p, nil
}

// Process is the supervised process; nil when none was started since the
// last exit was reaped.
func (s *Supervisor) Process() *Process { return s.proc }

// Running reports whether the supervised etcd is running.
func (s *Supervisor) Running() bool { return s.proc != nil && s.proc.Running() }

// Done is closed when the running etcd exits; nil when there is none.
func (s *Supervisor) Done() <-chan struct{} {
	if s.proc == nil {
		return nil
	}
	return s.proc.Done()
}

// Reap returns the exit of an etcd that ended since the last call, once.
func (s *Supervisor) Reap() (Exit, bool) {
	if s.proc == nil || s.proc.Running() {
		return Exit{}, false
	}
	e := s.proc.Exit()
	s.proc = nil
	if e.Uptime > StableUptime {
		s.backoff.Reset()
	}
	return e, true
}

// ScheduleRestart sets when etcd may start again after an exit: at once
// when now is true (the start decision handles the exit), else after the
// next backoff delay. It returns the delay.
func (s *Supervisor) ScheduleRestart(now bool) time.Duration {
	d := time.Duration(0)
	if !now {
		d = s.backoff.Next()
	}
	s.nextStart = time.Now().Add(d)
	return d
}

// RestartIn is the backoff left before the next start (0: start now).
func (s *Supervisor) RestartIn() time.Duration { return max(time.Until(s.nextStart), 0) }

// Stable notes that etcd serves; after StableUptime the backoff resets.
func (s *Supervisor) Stable() {
	if s.proc != nil && time.Since(s.proc.Started()) > StableUptime {
		s.backoff.Reset()
	}
}

// Stop stops the running etcd gracefully and reaps it; the next start may
// follow at once.
func (s *Supervisor) Stop() (Exit, error) {
	if s.proc == nil {
		return Exit{}, nil
	}
	if err := s.proc.Stop(s.stop); err != nil {
		return Exit{}, err
	}
	e := s.proc.Exit()
	s.proc = nil
	s.nextStart = time.Time{}
	return e, nil
}

// Kill kills the running etcd at once (SIGKILL, see Process.Kill) and
// reaps it; the next start may follow at once.
func (s *Supervisor) Kill(why string) (Exit, error) {
	if s.proc == nil {
		return Exit{}, nil
	}
	if err := s.proc.Kill(why); err != nil {
		return Exit{}, err
	}
	e := s.proc.Exit()
	s.proc = nil
	s.nextStart = time.Time{}
	return e, nil
}

// Restart stops the running etcd gracefully and starts it again with the
// very command it was started with. It is how a member stalled in its
// publish is unstuck: etcd stops at once before it is ready, and the
// snapshot it applied is on disk, so the new process starts from it and
// publishes again (docs/etcd-publish-stall.md).
func (s *Supervisor) Restart(dataDir string) (Exit, *Process, error) {
	if s.proc == nil {
		return Exit{}, nil, fmt.Errorf("restart: etcd is not running")
	}
	c := s.last
	e, err := s.Stop()
	if err != nil {
		return e, nil, err
	}
	p, err := s.Start(c, dataDir)
	return e, p, err
}

// Backoff is an exponential restart delay with jitter, reset after etcd
// ran stably.
type Backoff struct {
	Base, Max time.Duration
	n         int
}

// Next is the next delay: 0 the first time (one crash is no loop), then
// Base, 2×Base, … up to Max, each with ±10% jitter.
func (b *Backoff) Next() time.Duration {
	if b.n == 0 {
		b.n++
		return 0
	}
	d := b.Base << min(b.n-1, 10)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	b.n++
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
	return d - d/10 + jitter
}

// Reset starts the backoff over.
func (b *Backoff) Reset() { b.n = 0 }
