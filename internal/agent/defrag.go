package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
)

// defrag defragments the member the maintenance rule chose. The agent
// that holds the cluster lock does it for any member, over that member's
// client URL, as it moves leadership for Plan: the decision is the same
// on every agent, the lock makes one of them act, and a member whose
// agent is down or busy is served all the same. etcd's defragmentation
// is atomic per member (a new file renamed over the db when complete): a
// call cut short — its deadline, this agent killed — leaves the old db,
// and the next pass observes and decides again, picking the member again
// while it is still fragmented.
func (a *Agent) defrag(ctx context.Context, step reconcile.Step, in reconcile.Input) (string, bool, error) {
	m, ok := in.Cluster.Member(step.MemberID)
	if !ok || len(m.ClientURLs) == 0 {
		return "defragmentation not started", false, fmt.Errorf("member %x has no client URL", step.MemberID)
	}
	ep := m.ClientURLs[0]
	deadline := cluster.DefragDeadline(m.DBSize)
	a.lg.Warn("defragmenting", zap.String("way", "online"), zap.String("target", step.Name), zap.String("target-id", fmt.Sprintf("%x", m.ID)), zap.String("why", step.Reason),
		zap.String("db-size", reconcile.FmtBytes(m.DBSize)), zap.String("free", reconcile.FmtBytes(m.FreeBytes())),
		zap.Int64("db-size-bytes", m.DBSize), zap.Int64("in-use-bytes", m.DBSizeInUse), zap.Duration("deadline", deadline))
	start := time.Now()
	a.updateStatus(func(s *Status) {
		s.Maintenance = fmt.Sprintf("defragmenting %s since %s, deadline %s", step.Name, start.UTC().Format(time.TimeOnly), deadline)
		s.Defragmenting = m.ID
	})
	defer a.updateStatus(func(s *Status) { s.Maintenance, s.Defragmenting = "", 0 })
	a.publish(ctx) // status shows it running, on every host
	stop := a.feedWithin(start, deadline)
	if a.cfg.CrashAt == "defrag" {
		// For tests: exit hard with the call under way.
		go func() { _ = a.client.Defragment(ctx, ep, deadline) }()
		time.Sleep(20 * time.Millisecond)
		a.crashPoint("defrag")
	}
	err := a.client.Defragment(ctx, ep, deadline)
	stop()
	took := time.Since(start)
	if err != nil {
		a.metrics.Space.DefragDone(took, 0, err)
		a.remember(history.Event{Kind: "defrag-failed", Member: step.Name, MemberID: history.HexID(m.ID), Reason: step.Reason, Detail: map[string]string{"error": err.Error()}})
		a.lg.Error("defragmentation failed", zap.String("target", step.Name), zap.Duration("took", took.Round(time.Millisecond)), zap.Error(err))
		return fmt.Sprintf("defragmentation of %s failed", step.Name), false, err
	}
	// The size after is the next observation's too; asked now for the
	// log line and the bytes freed.
	var after, inUse, freed int64
	if st, err := a.client.Status(ctx, ep); err == nil {
		after, inUse, freed = st.DbSize, st.DbSizeInUse, max(0, m.DBSize-st.DbSize)
	}
	a.metrics.Space.DefragDone(took, freed, nil)
	if inUse == 0 {
		inUse = after // an etcd that does not report it: the file is the data and a few pages
	}
	if inUse > 0 {
		// For the NOSPACE procedure (reconcile.settledAt); a size not
		// asked (the status call failed) leaves the member to be
		// defragmented again.
		a.defragmented[m.ID] = model.DefragMark{InUse: inUse, Size: after, At: time.Now(), Below: reconcile.DataBelow(*in.Cluster)}
	}
	a.remember(history.Event{Kind: "defrag", Member: step.Name, MemberID: history.HexID(m.ID), Reason: step.Reason,
		Detail: map[string]string{"before": reconcile.FmtBytes(m.DBSize), "after": reconcile.FmtBytes(after), "took": took.Round(time.Millisecond).String()}})
	a.lg.Warn("defragmented", zap.String("way", "online"), zap.String("target", step.Name), zap.String("target-id", fmt.Sprintf("%x", m.ID)),
		zap.String("before", reconcile.FmtBytes(m.DBSize)), zap.String("after", reconcile.FmtBytes(after)),
		zap.Int64("before-bytes", m.DBSize), zap.Int64("after-bytes", after), zap.Int64("freed-bytes", freed),
		zap.Duration("took", took.Round(time.Millisecond)))
	return fmt.Sprintf("defragmented %s: %s -> %s in %s", step.Name, reconcile.FmtBytes(m.DBSize), reconcile.FmtBytes(after), took.Round(time.Millisecond)), true, nil
}

// defragmentedBy names the agent whose record says it defragments this
// host's member now ("" for none, or when the records cannot be read).
func (a *Agent) defragmentedBy(ctx context.Context) string {
	id := a.memberID()
	if id == 0 {
		return ""
	}
	s, _ := a.Spec()
	recs, err := a.client.Agents(ctx, s.Cluster.Name)
	if err != nil {
		return ""
	}
	for _, r := range recs {
		if r.Defragmenting == id {
			return r.Name
		}
	}
	return ""
}

// feedWithin keeps the systemd watchdog fed during one long call that
// began at start and cannot outlive deadline (a defragmentation, the
// NOSPACE procedure's compaction), and not after: the step counts as
// progressing while it is inside its deadline. The returned stop ends it.
func (a *Agent) feedWithin(start time.Time, deadline time.Duration) (stop func()) {
	return a.notify.While(func() int64 {
		if e := time.Since(start); e < deadline {
			return int64(e / time.Second)
		}
		return -1
	})
}
