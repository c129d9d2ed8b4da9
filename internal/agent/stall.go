package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// etcd's publish stall (docs/etcd-publish-stall.md): a joining member that
// was sent a snapshot already holding its own publish waits out etcd's 7 s
// request timeout before it serves. The agent sees it in etcd's log
// (etcdproc's publish watch), and restarts a joining learner's etcd, which
// then starts from the snapshot it applied and publishes at once.

// maxStallRestarts bounds the restarts for the stall between two answers
// of the local etcd: should a restart not help, etcd's own retry does.
const maxStallRestarts = 3

// restartPublishStall is agent.restartPublishStall (on by default).
func (a *Agent) restartPublishStall() bool {
	s, _ := a.Spec()
	return s.Agent.RestartPublishStall == nil || *s.Agent.RestartPublishStall
}

// confirmTimeout bounds publishInSnapshot's question to the local etcd.
const confirmTimeout = 500 * time.Millisecond

// publishInSnapshot answers the publish watch (etcdproc.PublishHooks.Confirm)
// right after the local etcd applied a snapshot from the leader without
// publishing itself: does its membership already hold the new member's
// name and client URLs? Only the member's own publish sets them. Either
// the publish was inside the snapshot, and etcd waits out its 7 s
// timeout (the stall), or it was applied right after the snapshot, and
// its log line is milliseconds away: the watch gives it 10 ms more
// before it counts the stall. Should the line come later still, the cost
// is one restart of a learner that was about to serve. It asks only about
// a rejoin's new member (the journal's NewMemberID): a member that
// published before keeps its name and client URLs in every snapshot.
func (a *Agent) publishInSnapshot() bool {
	if !a.restartPublishStall() {
		return false
	}
	j, err := a.loadJournal()
	if err != nil || !j.Open() || j.NewMemberID == 0 {
		return false
	}
	_, self := a.Spec()
	if len(self.PeerURLs) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	started := time.Now()
	ms, _, err := cluster.PeerMemberList(ctx, self.PeerURLs[0], self)
	if err != nil {
		a.lg.Debug("local member list for the publish stall", zap.Error(err), zap.Duration("took", time.Since(started)))
		return false
	}
	published := false
	for _, m := range ms {
		if m.ID == j.NewMemberID {
			published = m.Name != "" || len(m.ClientURLs) > 0
		}
	}
	a.lg.Debug("local member list for the publish stall", zap.Bool("self-published", published), zap.Duration("took", time.Since(started)))
	return published
}

// statusContext is ctx, also cancelled when the local etcd stalls in its
// publish: the status call then stops waiting for an answer that would
// come only after etcd's publish timeout.
func (a *Agent) statusContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	p := a.etcd.Process()
	if p == nil || !a.restartPublishStall() || a.stallRestarts >= maxStallRestarts {
		return ctx, cancel
	}
	go func() {
		select {
		case <-p.PublishStalled():
			// Only while it still is: a publish that came after the
			// stall was seen (PublishStalled stays closed) serves.
			if p.LostPublishRace() {
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// observeStall notes a local etcd stalled in its publish, and for the
// decision whether the rejoin's new member is listed as a learner.
func (a *Agent) observeStall(ctx context.Context, l *model.Local) {
	p := a.etcd.Process()
	if p == nil || !p.LostPublishRace() {
		return
	}
	first := a.stalled != p
	a.stalled = p
	if !a.restartPublishStall() || a.stallRestarts >= maxStallRestarts {
		if first {
			why := "agent.restartPublishStall is off"
			if a.stallRestarts >= maxStallRestarts {
				why = fmt.Sprintf("restarted %d times already", a.stallRestarts)
			}
			a.lg.Warn("etcd lost the publish race: waiting out its publish timeout", zap.String("why", why), zap.Int("pid", p.PID()))
			a.metrics.PublishStalls.WithLabelValues("waited").Inc()
		}
		return
	}
	l.LostPublishRace = true
	j, err := a.loadJournal()
	if err != nil || !j.Open() || j.NewMemberID == 0 {
		return
	}
	_, members, err := a.client.Members(ctx)
	if err != nil {
		a.lg.Debug("member list for the publish stall", zap.Error(err))
		return
	}
	for _, m := range members {
		if m.ID == j.NewMemberID {
			l.ListedAsLearner = m.IsLearner
		}
	}
}

// restartStalled stops the stalled etcd and starts it again with the same
// command: its data dir now holds the snapshot, and it publishes again.
func (a *Agent) restartStalled(reason string) (string, bool, error) {
	_, self := a.Spec()
	old := a.etcd.Process()
	started := time.Now()
	e, p, err := a.etcd.Restart(self.DataDir)
	if err != nil {
		return "restarting etcd stalled in its publish", false, err
	}
	a.stallRestarts++
	a.settling, a.silentSince, a.data = true, time.Time{}, nil
	a.metrics.PublishStalls.WithLabelValues("restarted").Inc()
	a.lg.Warn("etcd lost the publish race: restarted it", zap.Int("old-pid", old.PID()), zap.Stringer("exit", e),
		zap.Int("pid", p.PID()), zap.Duration("stop-took", time.Since(started).Round(time.Millisecond)), zap.Int("restarts", a.stallRestarts))
	a.updateStatus(func(st *Status) { st.EtcdPID = p.PID() })
	return reason, true, nil
}
