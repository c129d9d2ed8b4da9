// Package agent is etcdkeeper's per-host loop: observe the local etcd and
// the cluster, decide with the pure functions of package reconcile, act one
// step, observe again.
package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/notify"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Config is how the agent is started.
type Config struct {
	Spec *spec.Spec
	// Name is this host's member name in the spec.
	Name string
	// Self is the etcdkeeper binary, which runs the embedded etcd as
	// "etcdkeeper etcd ..." when the spec names no etcd binary.
	Self   string
	Logger *zap.Logger
	// Env is the environment etcd inherits (systemd variables are dropped).
	Env []string
	// CrashAt, for tests only, makes the agent exit hard right before the
	// named rejoin step ("remove", "move", "add", "start").
	CrashAt string
}

// Agent supervises one member.
type Agent struct {
	cfg  Config
	lg   *zap.Logger
	wake chan struct{}

	mu     sync.Mutex
	spec   *spec.Spec
	self   spec.Member
	inSpec bool
	status Status

	// Owned by the loop goroutine.
	proc      *etcdproc.Process
	client    *cluster.Client
	lock      *cluster.Lock
	lockSince time.Time
	lastExit  *exitInfo
	restarts  backoff
	nextStart time.Time
	lastSaid  string
	// pendingSince remembers since when each learner or unstarted member
	// has been pending, for the learner timeout.
	pendingSince model.Pending
	presence     *cluster.Presence
	// settings are the etcd flags (bootstrap flags aside) the running etcd
	// was started with; a spec edit that changes them restarts etcd.
	settings    string
	lastSpecErr string
	reloadReq   atomic.Bool
	notify      *notify.Notifier
	// silentSince is when the running etcd stopped answering (zero while
	// it answers).
	silentSince time.Time
	// settling: etcd was just started and is not a healthy voter yet;
	// the loop looks again quickly instead of waiting a whole interval.
	settling bool
	metrics  *metrics.Metrics
}

// New checks that name is in the spec and prepares the agent.
func New(cfg Config) (*Agent, error) {
	self, ok := cfg.Spec.Lookup(cfg.Name)
	if !ok {
		return nil, fmt.Errorf("member %q is not in the spec %s (members: %v): pass --name with one of them", cfg.Name, cfg.Spec.Path, cfg.Spec.Names())
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	lg := cfg.Logger.With(zap.String("member", cfg.Name), zap.String("cluster", cfg.Spec.Cluster.Name))
	a := &Agent{cfg: cfg, lg: lg, wake: make(chan struct{}, 1), spec: cfg.Spec, self: self, inSpec: true}
	a.restarts = backoff{base: time.Second, max: 30 * time.Second}
	a.notify = notify.New(lg)
	a.metrics = metrics.New()
	return a, nil
}

// Wake asks the loop to look again now (a spec change, SIGHUP).
func (a *Agent) Wake() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Spec is the spec in force.
func (a *Agent) Spec() (*spec.Spec, spec.Member) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.spec, a.self
}

// Run runs the loop until ctx ends, then stops etcd and returns.
func (a *Agent) Run(ctx context.Context) error {
	s, self := a.Spec()
	a.lg.Info("agent starting", zap.String("spec", s.Path), zap.String("generation", s.Generation),
		zap.String("data-dir", self.DataDir), zap.String("state-dir", self.StateDir))
	if err := os.MkdirAll(self.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if pid, err := etcdproc.StopLeftover(a.pidFile(), self.DataDir, s.Agent.StopTimeout.Duration); err != nil {
		a.lg.Error("leftover etcd", zap.Error(err))
	} else if pid != 0 {
		a.lg.Warn("stopped a leftover etcd of this member", zap.Int("pid", pid))
	}
	defer a.shutdown()
	go a.watchSpec(ctx)
	for {
		a.onePass(ctx)
		a.notify.Ready()
		a.notify.Status(a.statusLine())
		a.notify.Ping()
		timer := time.NewTimer(a.notify.MaxWait(a.interval()))
		var done <-chan struct{}
		if a.proc != nil {
			done = a.proc.Done()
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-done:
			timer.Stop()
		case <-a.wake:
			timer.Stop()
		}
	}
}

func (a *Agent) interval() time.Duration {
	s, _ := a.Spec()
	d := s.Agent.Interval.Duration
	if d <= 0 {
		d = 2 * time.Second
	}
	if a.settling && a.proc != nil && d > settleInterval && time.Since(a.proc.Started()) < settleFor {
		return settleInterval
	}
	if a.proc == nil && !a.nextStart.IsZero() {
		if until := time.Until(a.nextStart); until > 0 && until < d {
			return until
		}
	}
	return d
}

// onePass runs one reconcile pass and logs its decision when it changed:
// state changes, not heartbeats.
func (a *Agent) onePass(ctx context.Context) {
	a.reload()
	said, err := a.pass(ctx)
	a.metrics.PassDone(err)
	if err != nil {
		said = said + ": " + err.Error()
	}
	a.setDecision(said, err)
	if said == a.lastSaid {
		return
	}
	a.lastSaid = said
	if err != nil {
		a.lg.Warn("decision", zap.String("decision", said))
		return
	}
	a.lg.Info("decision", zap.String("decision", said))
}

func (a *Agent) shutdown() {
	a.notify.Stopping()
	s, _ := a.Spec()
	// Give up the lock and the agent record while the cluster still
	// answers, then stop etcd.
	ctx := context.Background()
	a.releaseLock(ctx)
	if a.presence != nil {
		_ = a.presence.Close()
		a.presence = nil
	}
	if a.proc != nil && a.proc.Running() {
		a.lg.Info("stopping etcd", zap.Int("pid", a.proc.PID()))
		if err := a.proc.Stop(s.Agent.StopTimeout.Duration); err != nil {
			a.lg.Error("stop etcd", zap.Error(err))
		}
		a.lg.Info("etcd stopped", zap.Stringer("exit", a.proc.Exit()))
	}
	if a.client != nil {
		_ = a.client.Close()
		a.client = nil
	}
	a.lg.Info("agent stopped")
}

func (a *Agent) pidFile() string {
	_, self := a.Spec()
	return filepath.Join(self.StateDir, "etcd.pid")
}

// settleInterval is the loop's period while a just-started etcd settles.
const (
	settleInterval = 50 * time.Millisecond
	settleFor      = 30 * time.Second
)

// backoff is an exponential restart delay with jitter, reset after etcd
// ran stably.
type backoff struct {
	base, max time.Duration
	n         int
}

func (b *backoff) next() time.Duration {
	// The first restart is immediate: one crash is no loop.
	if b.n == 0 {
		b.n++
		return 0
	}
	d := b.base << min(b.n-1, 10)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.n++
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
	return d - d/10 + jitter
}

func (b *backoff) reset() { b.n = 0 }
