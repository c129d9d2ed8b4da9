// Package agent is etcdkeeper's per-host loop. One pass observes the local
// etcd and the cluster once, asks the pure reconcile.Decide for one
// action, takes that one step, and reports; then it observes again.
package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/notify"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/upgrade"
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
	// named rejoin step's side effect ("snapshot", "remove", "move", "add",
	// "start"), or, "upgrade-exec", between stopping etcd and the exec
	// onto a new binary.
	CrashAt string
	// Version is etcdkeeper's own version (main.version).
	Version string
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
	etcd      *etcdproc.Supervisor
	client    *cluster.Client
	lock      *cluster.Lock
	lockSince time.Time
	// pause is the operator's pause last read from the cluster; paused,
	// whether it was in force at the last pass.
	pause  *model.Pause
	paused bool
	// pauseMark is what a resume of pause leaves, for ResumeLocal
	// (another goroutine).
	pauseMark atomic.Pointer[model.ResumeMark]
	// lockReturned is when this agent, a learner that did not catch up in
	// time, gave the lock back (zero: it did not).
	lockReturned time.Time
	// compacted is the revision the NOSPACE procedure last compacted to;
	// noSpace what the agent last reported of NOSPACE.
	compacted int64
	// defragmented: the revision at which this agent last defragmented each member.
	defragmented map[uint64]model.DefragMark
	noSpace      noSpaceState
	presence     *cluster.Presence
	// lastExit is etcd's last exit, classified; nil once it serves again.
	lastExit *model.Exit
	// data is the data dir as last inspected; only this agent changes it,
	// so it stays valid, for a while, until etcd starts or the data is
	// moved (a full check of a large db takes a while).
	data *model.Data
	// dataAt and dataDev are when data was inspected, and the device the
	// data dir was on then: another device (a disk mounted) is another dir.
	dataAt  time.Time
	dataDev uint64
	// pending remembers since when each learner or unstarted member has
	// been pending, for the learner timeout.
	pending model.Pending
	// down remembers since when each started member has been unhealthy,
	// for the grace a claimed name gets.
	down model.Down
	// settings are the etcd flags (bootstrap flags aside) the running etcd
	// was started with; a spec edit that changes them restarts etcd.
	settings string
	// restarted: this agent restarted its member for a rollout and has
	// held the cluster lock since (released once it has caught up).
	restarted bool
	// rolloutSnapshot is the rollout (reconcile.RolloutKey) this agent
	// took the verified snapshot for; restartPending why its member is
	// due for a restart ("": not).
	rolloutSnapshot string
	restartPending  string
	restartAgent    bool
	// request is where the operator's request stood after the last pass
	// (nil: none), for the record; requestDone the members this agent
	// defragmented for the request requestID.
	rollout      *model.RolloutNote
	request      *model.RequestProgress
	requestID    string
	requestDone  []uint64
	requestSteps []string
	// turnMu orders the host turn's wish (turn.go) between the control
	// socket's handlers and the loop; turnProgress is where the wish
	// stands after the last pass, turnEnded the last wish that ended.
	turnMu       sync.Mutex
	turnProgress *model.TurnProgress
	turnEnded    *model.TurnProgress
	// turnGoneID is the wish whose guard this agent saw gone first at
	// turnGoneAt.
	turnGoneID string
	turnGoneAt time.Time
	// turnSight times how long the cluster's turn key has stood
	// unchanged, on this agent's clock (turn.go).
	turnSight turnSight
	// exe is the agent's own executable (nil: unknown, no upgrades);
	// installedSeen what the last look at its path found, for the log;
	// upgrading the open upgrade journal (this process is the new binary
	// finishing the step), upgradeLooked whether it was read.
	exe           *upgrade.Self
	installedSeen string
	upgrading     *upgrade.Journal
	upgradeLooked bool
	// binary is the etcd binary the running etcd was started from (nil:
	// not started by this agent); binaries caches what each binary file
	// is (spec.ReadBinary runs it), by path, size and mtime.
	binary   *spec.Binary
	binaries map[string]cachedBinary
	// silentSince is when the running etcd stopped answering (zero while
	// it answers).
	silentSince time.Time
	// silentFirst is when the running etcd first went silent, silentBytes
	// the snap dir's size when silentSince was last set.
	silentFirst time.Time
	silentBytes int64
	// leaderAt is when the local etcd last answered with a leader.
	leaderAt time.Time
	// still follows the silent etcd's process (stillPID): stopped, or
	// neither working nor writing.
	still    etcdproc.Stillness
	stillPID int
	// stalled is the last etcd process seen stalled in its publish, and
	// stallRestarts the restarts for it since etcd last answered.
	stalled       *etcdproc.Process
	stallRestarts int
	// settling: etcd was just started and is not a healthy voter yet;
	// the loop looks again quickly instead of waiting a whole interval.
	settling bool
	lastKey  string
	// disk measures the local member's disk from etcd's histograms
	// (disk.go).
	disk diskMeter
	// steadyPasses counts the passes in a row that found nothing to do in
	// a cluster that matches the spec (see steadyInterval).
	steadyPasses int
	lastSpecErr  string
	reloadReq    atomic.Bool
	// reloadAnnounce: the pending reload came from SIGHUP (announce it).
	reloadAnnounce atomic.Bool
	notify         *notify.Notifier
	metrics        *metrics.Metrics
	backups        *backup.Scheduler  // see startBackups
	certs          []model.CertStatus // see startRenewal
	// A CA rotation (rotation.go): what the running etcd trusts (set at
	// launch), what the pass saw for the renewal goroutine, what this host
	// says of its CAs and its last rotation step; certWake wakes the
	// renewal goroutine.
	etcdTrust    []string
	rotationSeen rotationSeen
	caTrust      *model.CATrust
	rotation     reconcile.Rotation
	clientCA     string
	certWake     chan struct{}
	// recMu orders the recovery journal's writers: the endpoint that
	// accepts a request and the loop that carries it out.
	recMu sync.Mutex
	// lastReport is the loop's last full inspection of the data dir
	// (guarded by mu), which GET /recovery reports instead of checking
	// the data again in the handler.
	lastReport *repair.Report
	// writeErrs are the state dir's files that cannot be written, with
	// the error (guarded by mu; see noteWrite).
	writeErrs map[string]string
	// awayLooked is when observeAway last looked at the cluster.
	awayLooked time.Time
	// observed is closed once the loop's first pass is over: a recovery
	// request waits for it, never judged on a status nobody filled yet.
	observed     chan struct{}
	observedOnce sync.Once
	// history mirrors this agent's events in its state dir;
	// historyPending: some are not in the cluster yet (see pushHistory).
	history        *history.Mirror
	historyPending atomic.Bool
	// lastRejoinError is the repair's failed step last recorded in the
	// history (rememberRejoinError): the same failure is recorded once.
	lastRejoinError string
	// histMu guards unsaved, the events the mirror could not take yet.
	histMu  sync.Mutex
	unsaved []history.Event

	// offlineFailed: when this agent's last offline defragmentation of
	// its member failed (zero: it did not); its record then says, for a
	// while, that it does not defragment offline.
	offlineFailed time.Time
	// offlineShown: the status says this agent defragments its member
	// offline (showOffline).
	offlineShown bool
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
	a := &Agent{cfg: cfg, lg: lg, wake: make(chan struct{}, 1), spec: cfg.Spec, self: self, inSpec: true, pending: model.Pending{}, down: model.Down{},
		observed: make(chan struct{}), certWake: make(chan struct{}, 1)}
	a.etcd = etcdproc.NewSupervisor(lg.Named("etcd"), filepath.Join(self.StateDir, "etcd.pid"), cfg.Spec.Agent.StopTimeout.Duration)
	a.etcd.Publish = etcdproc.PublishHooks{OnStall: a.Wake, OnPublished: a.Wake, Confirm: a.publishInSnapshot}
	a.notify = notify.New(lg)
	a.metrics = metrics.New()
	build := model.Build{Version: cfg.Version, EtcdVersion: etcdversion.Version}
	if exe, err := upgrade.Running(build); err != nil {
		lg.Warn("cannot tell the agent's own executable: a new binary installed will not be noticed", zap.Error(err))
	} else {
		a.exe = exe
	}
	a.metrics.SetBuild(build.Version, build.EtcdVersion)
	a.status.Version, a.status.EtcdVersion = build.Version, build.EtcdVersion
	a.metrics.WatchFenceStale(func() bool { return a.Status().FenceStale })
	a.history = history.NewMirror(filepath.Join(self.StateDir, history.FileName), history.Keep)
	a.historyPending.Store(true) // what an earlier run could not push
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

// maxQuickPasses bounds how many passes follow each other without a pause
// (after a step that made progress, such as taking the lock).
const maxQuickPasses = 5

// Run runs the loop until ctx ends, then stops etcd and returns.
func (a *Agent) Run(ctx context.Context) error {
	// From the start (a leftover etcd may take seconds to stop) until etcd
	// has stopped: deferred first, it ends last.
	defer a.notify.Watchdog()()
	s, self := a.Spec()
	a.lg.Info("agent starting", zap.String("spec", s.Path), zap.String("generation", s.Generation),
		zap.String("data-dir", self.DataDir), zap.String("state-dir", self.StateDir))
	if err := os.MkdirAll(self.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if a.adoptEtcd() {
		// The old binary's etcd, running on: nothing left over.
	} else if pid, err := a.etcd.StopLeftover(self.DataDir); err != nil {
		a.lg.Error("leftover etcd", zap.Error(err))
	} else if pid != 0 {
		a.lg.Warn("stopped a leftover etcd of this member", zap.Int("pid", pid))
	}
	defer a.shutdown()
	a.metrics.SetCertificates(self.Name, self.TLS.CertFiles())
	go a.watchSpec(ctx)
	defer a.startBackups(ctx)()
	defer a.startRenewal(ctx)()
	quick := 0
	for {
		a.notify.Busy()
		again := a.onePass(ctx)
		a.observedOnce.Do(func() { close(a.observed) })
		a.notify.Ready()
		a.notify.Status(a.statusLine())
		if again && quick < maxQuickPasses && ctx.Err() == nil {
			quick++
			continue
		}
		quick = 0
		timer := time.NewTimer(a.interval())
		a.notify.Idle()
		select {
		case <-ctx.Done():
			timer.Stop()
			a.notify.Busy() // the shutdown is work too
			return nil
		case <-timer.C:
		case <-a.etcd.Done():
			timer.Stop()
		case <-a.wake:
			timer.Stop()
		}
	}
}

// settleInterval is the loop's period while a just-started etcd settles.
const (
	settleInterval = 50 * time.Millisecond
	settleFor      = 30 * time.Second
)

// steadyInterval is the loop's longest period while nothing needs it: the
// local member has been a healthy voter, every member healthy and the
// cluster as the spec wants it, for steadyAfter passes in a row. Each pass
// costs RPCs to every member; at agent.interval 500ms an idle agent spent
// 3% of a core on them. What needs this agent at once still wakes it: its
// etcd exiting, a spec change or SIGHUP, a publish stall. What the others
// need from it (removing a member that stays down) waits for minutes-long
// timeouts anyway.
const (
	steadyInterval = spec.SteadyInterval
	steadyAfter    = 3
)

func (a *Agent) interval() time.Duration {
	s, _ := a.Spec()
	d := s.Agent.Interval.Duration
	if d <= 0 {
		d = 2 * time.Second
	}
	if p := a.etcd.Process(); a.settling && p != nil && d > settleInterval && time.Since(p.Started()) < settleFor {
		return settleInterval
	}
	if a.steadyPasses >= steadyAfter && d < steadyInterval {
		return steadyInterval
	}
	if !a.etcd.Running() {
		if until := a.etcd.RestartIn(); until > 0 && until < d {
			return until
		}
	}
	return d
}

func (a *Agent) shutdown() {
	a.notify.Stopping()
	// Give up the lock and the agent record while the cluster still
	// answers, then stop etcd.
	ctx := context.Background()
	a.releaseLock(ctx)
	if a.presence != nil {
		if err := a.presence.Close(); err != nil {
			a.lg.Warn("agent record stays until its lease expires", zap.Int("ttl-seconds", cluster.PresenceTTL), zap.Error(err))
		}
		a.presence = nil
	}
	if p := a.etcd.Process(); p != nil && p.Running() {
		a.handOffLeadership(ctx, reconcile.Input{})
		a.lg.Info("stopping etcd", zap.Int("pid", p.PID()))
		e, err := a.etcd.Stop()
		if err != nil {
			a.lg.Error("stop etcd", zap.Error(err))
		}
		a.lg.Info("etcd stopped", zap.Stringer("exit", e))
	}
	if a.client != nil {
		_ = a.client.Close()
		a.client = nil
	}
	a.lg.Info("agent stopped")
}
