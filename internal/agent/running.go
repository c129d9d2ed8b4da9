package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// converge handles a running local etcd: record who it is, promote it while
// it is a learner, finish an open rejoin, and report.
func (a *Agent) converge(ctx context.Context) (string, error) {
	_, self := a.Spec()
	st, err := a.client.Status(ctx, self.ClientURLs[0])
	if err != nil {
		return a.notAnswering(ctx)
	}
	a.silentSince = time.Time{}
	id, cid := st.Header.MemberId, st.Header.ClusterId
	if err := a.recordMarker(cid, id); err != nil {
		return "recording membership", err
	}
	a.noteLocal(id, cid, st.Leader, st.IsLearner)
	a.publish(ctx)
	if alarmed(st.Errors, id, "CORRUPT") {
		return a.stopForRepair(fmt.Sprintf("etcd raised a CORRUPT alarm on member %x", id))
	}
	if st.Leader == 0 {
		a.setPhase("waiting")
		return "waiting: local member has no leader", nil
	}
	if st.IsLearner {
		return a.promote(ctx, id)
	}
	a.rejoinFinished(ctx, id)
	if time.Since(a.proc.Started()) > stableUptime {
		a.restarts.reset()
	}
	a.lastExit = nil
	a.settling = false
	a.setPhase("running")
	if said, err := a.rollingRestart(ctx, id); said != "" || err != nil {
		return said, err
	}
	if said, err := a.reconcileMembership(ctx); said != "" || err != nil {
		return said, err
	}
	return fmt.Sprintf("no action: %s is a healthy voter (member %x, leader %x)", self.Name, id, st.Leader), nil
}

// promote asks the cluster to promote the local learner; etcd refuses
// until the learner has caught up with the leader's log.
func (a *Agent) promote(ctx context.Context, id uint64) (string, error) {
	a.setPhase("promoting")
	err := a.client.Promote(ctx, id)
	if cluster.IsLearnerNotReady(err) {
		a.lockNotForever(ctx)
		return fmt.Sprintf("waiting: learner %x is catching up with the leader", id), nil
	}
	if err != nil {
		return fmt.Sprintf("promote of learner %x failed", id), err
	}
	a.lg.Info("promoted to voter", zap.String("member-id", fmt.Sprintf("%x", id)))
	a.metrics.MembershipChanges.WithLabelValues("promote").Inc()
	a.rejoinFinished(ctx, id)
	return fmt.Sprintf("promoted: learner %x is now a voter", id), nil
}

// rejoinFinished closes an open rejoin journal and releases the lock once
// the member is a voter.
func (a *Agent) rejoinFinished(ctx context.Context, id uint64) {
	j, err := a.loadJournal()
	if err == nil && j.Step != "" && j.Step != stepDone {
		took := time.Since(j.StartedAt)
		if err := a.advance(&j, stepDone, zap.String("member-id", fmt.Sprintf("%x", id)), zap.Duration("took", took.Round(time.Millisecond))); err == nil {
			if j.Class == "repair" {
				a.metrics.Repairs.WithLabelValues("done").Inc()
			}
			a.lg.Warn("rejoin finished: member is a healthy voter", zap.String("id", j.ID), zap.String("kind", j.Class),
				zap.String("old-member-id", fmt.Sprintf("%x", j.OldMemberID)), zap.String("new-member-id", fmt.Sprintf("%x", id)),
				zap.String("backup", j.BackupPath), zap.Duration("took", took.Round(time.Millisecond)))
		}
	}
	a.releaseLock(ctx)
}

// stopForRepair stops a running etcd whose data etcd itself found
// corrupt; the next pass takes the rejoin path.
func (a *Agent) stopForRepair(why string) (string, error) {
	s, _ := a.Spec()
	a.lg.Error("stopping etcd for repair", zap.String("reason", why))
	if err := a.proc.Stop(s.Agent.StopTimeout.Duration); err != nil {
		return "stopping etcd for repair", err
	}
	a.noteExit()
	a.lastExit.verdict = repair.Verdict{Class: repair.ClassCorrupt, Reason: why, Evidence: why}
	a.nextStart = time.Now()
	return "stopped etcd for repair: " + why, nil
}

func (a *Agent) recordMarker(clusterID, memberID uint64) error {
	m, err := a.loadMarker()
	if err != nil {
		return err
	}
	if m != nil && m.ClusterID == clusterID && m.MemberID == memberID {
		return nil
	}
	if err := a.saveMarker(model.Marker{ClusterID: clusterID, MemberID: memberID}); err != nil {
		return err
	}
	a.lg.Info("member identity recorded", zap.String("cluster-id", fmt.Sprintf("%x", clusterID)), zap.String("member-id", fmt.Sprintf("%x", memberID)))
	return nil
}

// alarmed reports whether the status errors carry alarm kind for member
// id. etcd renders an alarm as "memberID:<decimal> alarm:<KIND> ".
func alarmed(errs []string, id uint64, kind string) bool {
	want := fmt.Sprintf("memberID:%d ", id)
	for _, e := range errs {
		if strings.Contains(e+" ", want) && strings.Contains(e, "alarm:"+kind) {
			return true
		}
	}
	return false
}

// readyDeadline is how long a running etcd may stay silent (its client
// port serves only once it has published itself through raft) while its
// peers are healthy, before the agent stops it and checks its data.
const readyDeadline = 90 * time.Second

// notAnswering handles a running etcd whose client port does not answer.
// Waiting for peers is normal; but an etcd that stays silent although the
// others form a healthy quorum is stuck (e.g. it cut a damaged WAL and now
// lacks committed entries): stop it, so that the start path inspects the
// data dir and decides again.
func (a *Agent) notAnswering(ctx context.Context) (string, error) {
	a.updateStatus(func(s *Status) { s.Healthy = false; s.Phase = "starting" })
	a.metrics.MemberHealthy.Set(0)
	if a.silentSince.IsZero() || a.silentSince.Before(a.proc.Started()) {
		a.silentSince = time.Now()
	}
	silent := time.Since(a.silentSince)
	if silent < readyDeadline {
		return "waiting: local etcd is not answering yet", nil
	}
	if v, err := a.client.Observe(ctx); err != nil || !a.othersHaveQuorum(v) {
		return "waiting: local etcd is not answering and the peers have no healthy quorum without it", nil
	}
	s, _ := a.Spec()
	a.lg.Error("etcd is not answering although its peers are healthy: stopping it to check its data",
		zap.Duration("silent", silent.Round(time.Second)))
	if err := a.proc.Stop(s.Agent.StopTimeout.Duration); err != nil {
		return "stopping a stuck etcd", err
	}
	a.noteExit()
	a.silentSince = time.Time{}
	return fmt.Sprintf("stopped etcd: not answering for %s while its peers are healthy", silent.Round(time.Second)), nil
}

// othersHaveQuorum: the voters other than the local member form a healthy
// quorum of the voters without it.
func (a *Agent) othersHaveQuorum(v model.Cluster) bool {
	_, self := a.Spec()
	for _, m := range v.Members {
		if m.Name == self.Name {
			ok, _ := v.QuorumWithout(m.ID)
			return ok
		}
	}
	ok, _ := v.QuorumWithout(0)
	return ok
}

// lockNotForever gives the cluster lock back when this member has held it
// for longer than agent.learnerTimeout without being promoted: the other
// agents may need it (and may remove this learner as stale).
func (a *Agent) lockNotForever(ctx context.Context) {
	s, _ := a.Spec()
	if a.lock != nil && time.Since(a.lockSince) > s.Agent.LearnerTimeout.Duration {
		a.lg.Warn("giving the cluster lock back: still a learner after agent.learnerTimeout")
		a.releaseLock(ctx)
	}
}
