package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/dbfile"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
)

// The offline defragmentation of this agent's own member
// (reconcile.defragWay): journal, stop etcd gracefully, rewrite its db
// (dbfile.Defragment: a copy renamed over the db when complete), and
// leave etcd to the start path, which starts it as it is; the lock stays
// until the member has caught up, then the journal closes. Each step is
// journaled before the next begins, so an agent killed between any two
// resumes where it was (reconcile.resumeOfflineDefrag); the member's
// data is never moved nor deleted.

// offlineFile is the journal of an offline defragmentation in the state
// dir.
const offlineFile = "defrag.json"

// offlineJournal is what the journal keeps.
type offlineJournal struct {
	MemberID uint64            `json:"memberID"`
	Step     model.OfflineStep `json:"step"`
	Request  string            `json:"request,omitempty"`
	Why      string            `json:"why,omitempty"`
	Begun    time.Time         `json:"begun"`
	// Before is the db file's size as the cluster last saw it; Outcome
	// what the rewrite did ("" before it ended).
	Before  int64  `json:"before,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

// offlineRetry is how long after a failed offline defragmentation this
// agent's record says it does not defragment offline: the others then
// pick the online way for its member, rather than stop it again for a
// rewrite that may fail again (a full disk).
const offlineRetry = time.Hour

func (a *Agent) loadOffline() (*offlineJournal, error) {
	var j offlineJournal
	found, err := statefile.Load(a.statePath(offlineFile), &j)
	if err != nil {
		return nil, fmt.Errorf("offline defragmentation journal: %w", err)
	}
	if !found {
		return nil, nil
	}
	return &j, nil
}

func (a *Agent) saveOffline(j offlineJournal) error {
	if err := a.noteWrite(offlineFile, statefile.Save(a.statePath(offlineFile), j)); err != nil {
		return fmt.Errorf("journaling the offline defragmentation (%s): %w", j.Step, err)
	}
	return nil
}

// observeOffline is the open journal as the decision sees it (nil: none).
// One that cannot be read is taken as none, loudly: the member then
// runs as it is, and the start path checks its data as usual.
func (a *Agent) observeOffline() *model.OfflineDefrag {
	j, err := a.loadOffline()
	if err != nil {
		a.lg.Error("going on as if no offline defragmentation were open", zap.Error(err))
		return nil
	}
	a.showOffline(j)
	if j == nil {
		return nil
	}
	return &model.OfflineDefrag{MemberID: j.MemberID, Step: j.Step, Request: j.Request}
}

// showOffline keeps the status, and so this agent's record, saying that
// it defragments its member offline for as long as the journal is open:
// the member is out of service from its stop to its catch-up, and the
// others' budgets name it so ("defragmented by agent node2"), also after
// this agent restarted mid-way.
func (a *Agent) showOffline(j *offlineJournal) {
	switch {
	case j != nil:
		_, self := a.Spec()
		a.updateStatus(func(s *Status) {
			s.Maintenance = fmt.Sprintf("defragmenting %s offline since %s (%s)", self.Name, j.Begun.UTC().Format(time.TimeOnly), j.Step)
			s.Defragmenting = j.MemberID
		})
		a.offlineShown = true
	case a.offlineShown:
		a.updateStatus(func(s *Status) { s.Maintenance, s.Defragmenting = "", 0 })
		a.offlineShown = false
	}
}

// defragsOffline: this agent's record says it defragments its member
// offline when asked (reconcile.defragWay).
func (a *Agent) defragsOffline() bool {
	return a.offlineFailed.IsZero() || time.Since(a.offlineFailed) > offlineRetry
}

// defragOffline is the step: journal, stop etcd, rewrite its db. The
// next pass starts etcd (the start path, as after a rolling restart's
// stop) and keeps the lock until the member has caught up.
func (a *Agent) defragOffline(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	// ctx is fenced by the lock: it ends a call's deadline after the
	// check (agent.fenceLock), and nothing here is a call the lock
	// guards. The record is published for seconds after it (the stop,
	// the rewrite), each publish with its own deadline.
	ctx = context.WithoutCancel(ctx)
	id := in.Local.Answer.MemberID
	m, _ := in.Cluster.Member(id)
	j := offlineJournal{MemberID: id, Step: model.OfflineStopping, Why: act.Reason, Begun: time.Now(), Before: m.DBSize}
	if act.Request != nil {
		j.Request = act.Request.ID
	}
	if err := a.saveOffline(j); err != nil {
		return "offline defragmentation not started", false, err
	}
	a.lg.Warn("defragmenting", zap.String("way", "offline"), zap.String("target", in.Self.Name), zap.String("target-id", fmt.Sprintf("%x", id)), zap.String("why", act.Reason),
		zap.String("db-size", reconcile.FmtBytes(m.DBSize)), zap.String("free", reconcile.FmtBytes(m.FreeBytes())))
	a.showOffline(&j)
	a.publish(ctx) // the others see who is out, and why
	a.crashPoint(repair.Step("defrag-offline-stopping"))
	if _, err := a.etcd.Stop(); err != nil {
		return "offline defragmentation: stopping etcd", false, fmt.Errorf("stopping etcd for its offline defragmentation: %w", err)
	}
	a.data = nil
	a.lg.Info("etcd stopped for its offline defragmentation")
	j.Step = model.OfflineStopped
	if err := a.saveOffline(j); err != nil {
		// etcd is stopped and the journal says "stopping": the next pass
		// resumes from there all the same (the rewrite, then the start).
		return "offline defragmentation: etcd stopped", true, err
	}
	a.showOffline(&j)
	a.publish(ctx) // a graceful stop can take seconds: the record's lease is renewed
	a.crashPoint(repair.Step("defrag-offline-stopped"))
	said := a.rewrite(ctx, &j)
	if act.Request != nil && j.Outcome == "done" {
		a.requestDone = append(a.requestDone, id)
	}
	return said, true, nil
}

// resumeDefragOffline is the step after a cut-short offline
// defragmentation, on a stopped etcd: the rewrite, once more.
func (a *Agent) resumeDefragOffline(ctx context.Context, _ reconcile.Action, _ reconcile.Input) (string, bool, error) {
	j, err := a.loadOffline()
	if err != nil || j == nil {
		// Nothing to resume: the start path starts etcd as it is.
		return "offline defragmentation: nothing to resume", true, err
	}
	a.lg.Warn("resuming an offline defragmentation cut short", zap.String("member-id", fmt.Sprintf("%x", j.MemberID)), zap.String("journaled", string(j.Step)), zap.Time("begun", j.Begun))
	if j.Step == model.OfflineStopping {
		j.Step = model.OfflineStopped
		if err := a.saveOffline(*j); err != nil {
			return "offline defragmentation: resuming", false, err
		}
	}
	said := a.rewrite(ctx, j)
	if j.Request != "" && j.Request == a.requestID && j.Outcome == "done" {
		a.requestDone = append(a.requestDone, j.MemberID)
	}
	return said, true, nil
}

// rewrite rewrites the stopped member's db and journals the rewrite as
// over, whatever its outcome: a failed rewrite leaves the old db whole,
// and the member starts on it (this agent then says, for a while, that it
// does not defragment offline).
func (a *Agent) rewrite(ctx context.Context, j *offlineJournal) string {
	_, self := a.Spec()
	start := time.Now()
	stop := a.feedWithin(start, cluster.DefragDeadline(j.Before))
	unpublish := a.publishWhile(ctx)
	r, err := dbfile.Defragment(a.lg, self.DataDir)
	unpublish()
	stop()
	took := time.Since(start)
	var said string
	if err != nil {
		a.offlineFailed = time.Now()
		j.Outcome = err.Error()
		a.metrics.Space.DefragDone(took, 0, err)
		a.remember(history.Event{Kind: "defrag-failed", MemberID: history.HexID(j.MemberID), Reason: j.Why, Detail: map[string]string{"error": err.Error(), "way": "offline"}})
		a.lg.Error("defragmentation failed", zap.String("way", "offline"), zap.String("target", self.Name), zap.String("then", "etcd starts on its db as it was"),
			zap.Duration("took", took.Round(time.Millisecond)), zap.Error(err))
		said = fmt.Sprintf("offline defragmentation of %s failed (etcd starts on its db as it was): %v", self.Name, err)
	} else {
		a.offlineFailed = time.Time{}
		j.Outcome = "done"
		a.metrics.Space.DefragDone(took, max(0, r.Before-r.After), nil)
		a.remember(history.Event{Kind: "defrag", Member: self.Name, MemberID: history.HexID(j.MemberID), Reason: j.Why,
			Detail: map[string]string{"before": reconcile.FmtBytes(r.Before), "after": reconcile.FmtBytes(r.After), "took": took.Round(time.Millisecond).String(), "way": "offline"}})
		a.lg.Warn("defragmented", zap.String("way", "offline"), zap.String("target", self.Name), zap.String("target-id", fmt.Sprintf("%x", j.MemberID)),
			zap.String("before", reconcile.FmtBytes(r.Before)), zap.String("after", reconcile.FmtBytes(r.After)),
			zap.Int64("before-bytes", r.Before), zap.Int64("after-bytes", r.After), zap.Int64("freed-bytes", max(0, r.Before-r.After)),
			zap.Duration("took", took.Round(time.Millisecond)))
		said = fmt.Sprintf("defragmented %s offline: %s -> %s in %s", self.Name, reconcile.FmtBytes(r.Before), reconcile.FmtBytes(r.After), took.Round(time.Millisecond))
	}
	j.Step = model.OfflineRewritten
	if err := a.saveOffline(*j); err != nil {
		// Resumed, it would rewrite once more: harmless.
		a.lg.Error("journaling the offline rewrite as over", zap.Error(err))
	}
	a.crashPoint(repair.Step("defrag-offline-rewritten"))
	return said
}

// endDefragOffline closes the journal once the member is a caught-up
// voter again; the decision gives the lock back.
func (a *Agent) endDefragOffline(_ context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
	j, _ := a.loadOffline()
	if err := statefile.Remove(a.statePath(offlineFile)); err != nil {
		return "closing the offline defragmentation journal", false, fmt.Errorf("offline defragmentation journal: %w", err)
	}
	_ = a.noteWrite(offlineFile, nil)
	a.showOffline(nil)
	if j != nil {
		a.lg.Info("offline defragmentation over: a caught-up voter again", zap.String("member-id", fmt.Sprintf("%x", j.MemberID)),
			zap.String("outcome", j.Outcome), zap.Duration("out-of-service", time.Since(j.Begun).Round(time.Millisecond)))
	}
	return act.Reason, true, nil
}

// publishWhile keeps this agent's record published during one long call
// of the pass (a rewrite of a large db outlasts the record's lease); the
// returned stop ends it, and returns once it has.
func (a *Agent) publishWhile(ctx context.Context) (stop func()) {
	done, over := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(over)
		t := time.NewTicker(cluster.PresenceTTL * time.Second / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				a.publish(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-over
	}
}
