package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// stableUptime: an etcd that ran this long resets the restart backoff.
const stableUptime = time.Minute

type exitInfo struct {
	exit    etcdproc.Exit
	verdict repair.Verdict
}

// pass is one reconcile pass. It returns a one-line statement of what it
// decided and why.
func (a *Agent) pass(ctx context.Context) (string, error) {
	if err := a.ensureClient(); err != nil {
		return "error", err
	}
	if a.proc != nil {
		if a.proc.Running() {
			return a.converge(ctx)
		}
		a.noteExit()
	}
	if wait := time.Until(a.nextStart); wait > 0 {
		return fmt.Sprintf("waiting: restart backoff after %s (%s)", a.lastExit.exit, a.lastExit.verdict.Class), nil
	}
	return a.start(ctx)
}

// noteExit classifies how etcd ended and schedules the next start.
func (a *Agent) noteExit() {
	e := a.proc.Exit()
	v := repair.Classify(repair.Exit{Code: e.Code, Signal: e.Signal, Tail: e.Tail})
	a.proc = nil
	a.lastExit = &exitInfo{exit: e, verdict: v}
	if e.Uptime > stableUptime {
		a.restarts.reset()
	}
	delay := time.Duration(0)
	switch v.Class {
	case repair.ClassCorrupt, repair.ClassRemoved:
		// The start decision handles these at once (rejoin or wait).
	default:
		delay = a.restarts.next()
	}
	a.nextStart = time.Now().Add(delay)
	a.metrics.EtcdRestarts.WithLabelValues(v.Class.String()).Inc()
	a.metrics.MemberHealthy.Set(0)
	a.metrics.SetRole("none")
	a.lg.Warn("etcd exited", zap.Stringer("exit", e), zap.Duration("uptime", e.Uptime.Round(time.Millisecond)),
		zap.Stringer("class", v.Class), zap.String("reason", v.Reason), zap.String("evidence", v.Evidence),
		zap.Duration("restart-in", delay.Round(time.Millisecond)))
	a.updateStatus(func(s *Status) {
		s.EtcdPID = 0
		s.Healthy = false
		s.Restarts++
		s.LastExit = e.String()
		s.LastExitClass = v.Class.String()
	})
}

// start decides how to start the local member and does it.
func (a *Agent) start(ctx context.Context) (string, error) {
	data := a.inspect(ctx)
	d, _, err := a.decideStart(ctx, data)
	if err != nil {
		return "error deciding how to start", err
	}
	switch d.Action {
	case reconcile.ActWait:
		a.releaseLock(ctx)
		a.setPhase("waiting")
		return "waiting: " + d.Reason, nil
	case reconcile.ActIdle:
		a.releaseLock(ctx)
		return a.idle(d)
	case reconcile.ActStartAsIs, reconcile.ActStartNew:
		s, _ := a.Spec()
		b := etcdproc.NewCluster(s)
		if d.Action == reconcile.ActStartAsIs {
			b = etcdproc.AsIs()
		}
		if err := a.launch(b); err != nil {
			return "starting etcd failed", err
		}
		return "started etcd: " + d.Reason, nil
	default:
		return a.rejoin(ctx, data)
	}
}

// decideStart observes the marker and the cluster and, with the inspected
// data dir, asks
// reconcile.DecideStart.
func (a *Agent) decideStart(ctx context.Context, data model.Data) (reconcile.StartDecision, *model.Cluster, error) {
	s, self := a.Spec()
	in := reconcile.StartInput{Self: self, SpecSize: len(s.Members)}
	_, in.InSpec = s.Lookup(self.Name)
	in.Data = data
	marker, err := a.loadMarker()
	if err != nil {
		return reconcile.StartDecision{}, nil, err
	}
	in.Marker = marker
	if a.lastExit != nil && a.lastExit.verdict.Class == repair.ClassCorrupt {
		in.ExitCorrupt = true
		in.ExitReason = a.lastExit.verdict.Reason
	}
	if !cluster.AnyListening(ctx, a.peerURLs()) {
		// Nobody listens on any peer's client or peer port: no cluster to
		// observe, and no call needs to wait out its deadline.
	} else if v, err := a.client.Observe(ctx); err == nil {
		in.Cluster = &v
	} else if in.Data.Kind == model.DataEmpty {
		// Only an empty data dir may lead to forming a new cluster: make
		// sure nobody is there before that.
		in.PeerAnswered = a.client.AnyPeerAnswers(ctx, a.peerEndpoints())
		if in.PeerAnswered == "" {
			in.PeerAnswered = cluster.ClusterWithout(ctx, self, a.peers())
		}
	}
	in.RepairBlocked = a.repairBlocked()
	return reconcile.DecideStart(in), in.Cluster, nil
}

// repairBlocked says why moving data is not allowed now, or "".
func (a *Agent) repairBlocked() string {
	s, _ := a.Spec()
	if s.Repair.Enabled != nil && !*s.Repair.Enabled {
		return "repair is disabled in the spec (repair.enabled: false)"
	}
	j, err := a.loadJournal()
	if err != nil {
		return err.Error()
	}
	if j.Step != "" && j.Step != stepDone {
		return "" // a repair under way is resumed, not counted again
	}
	if repair.RateLimited(j.Attempts, time.Now(), s.Repair.MaxPerHour) {
		return fmt.Sprintf("rate limit: %d repairs in the last hour (repair.maxPerHour)", s.Repair.MaxPerHour)
	}
	return ""
}

// launch starts etcd with flags from the spec.
func (a *Agent) launch(b etcdproc.Bootstrap) error {
	s, self := a.Spec()
	cmd := etcdproc.CommandFor(s, self, b, a.cfg.Self, a.cfg.Env)
	if err := os.MkdirAll(self.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	p, err := etcdproc.Start(a.lg.Named("etcd"), cmd)
	if err != nil {
		return err
	}
	a.proc = p
	a.settling = true
	a.settings = etcdproc.Settings(s, self)
	if err := etcdproc.WritePIDFile(a.pidFile(), p.PID()); err != nil {
		a.lg.Warn("pid file", zap.Error(err))
	}
	a.lg.Info("etcd started", zap.Int("pid", p.PID()), zap.Stringer("bootstrap", b))
	a.updateStatus(func(st *Status) { st.EtcdPID = p.PID(); st.Phase = "starting" })
	return nil
}

// idle keeps the member stopped; a data dir whose member the cluster
// removed is moved aside (kept) so that a later join starts clean.
func (a *Agent) idle(d reconcile.StartDecision) (string, error) {
	a.setPhase("idle")
	if !d.MoveData {
		return "idle: " + d.Reason, nil
	}
	_, self := a.Spec()
	dest, err := repair.MoveAside(self.DataDir, self.BackupDir, time.Now())
	if err != nil {
		return "idle: moving the removed member's data aside failed", err
	}
	if dest != "" {
		a.lg.Warn("moved the removed member's data dir aside", zap.String("from", self.DataDir), zap.String("to", dest))
	}
	return "idle: " + d.Reason, nil
}

func (a *Agent) setPhase(p string) { a.updateStatus(func(s *Status) { s.Phase = p }) }

// peerEndpoints are the client URLs of the spec's other members (of this
// one, in a one-member cluster).
func (a *Agent) peerEndpoints() []string {
	s, self := a.Spec()
	var eps []string
	for _, m := range s.Members {
		if m.Name != self.Name || len(s.Members) == 1 {
			eps = append(eps, m.ClientURLs...)
		}
	}
	return eps
}

// peerURLs are every client and peer URL of the spec's other members (of
// this one, in a one-member cluster).
func (a *Agent) peerURLs() []string {
	urls := a.peerEndpoints()
	for _, m := range a.peers() {
		urls = append(urls, m.PeerURLs...)
	}
	return urls
}

// peers are the spec's other members.
func (a *Agent) peers() []spec.Member {
	s, self := a.Spec()
	var out []spec.Member
	for _, m := range s.Members {
		if m.Name != self.Name {
			out = append(out, m)
		}
	}
	return out
}

// ensureClient dials the peers named in the spec.
func (a *Agent) ensureClient() error {
	if a.client != nil {
		return nil
	}
	s, self := a.Spec()
	eps := a.peerEndpoints()
	c, err := cluster.DialSpec(s, self, eps)
	if err != nil {
		return err
	}
	a.client = c
	return nil
}
