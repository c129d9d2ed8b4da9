package reconcile

import (
	"fmt"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Offline defragmentation: a member's own agent stops its etcd
// gracefully, rewrites its db file with etcd's own backend code (a copy
// renamed over the db when complete, as etcd does online), starts etcd
// again and keeps the cluster lock until the member has caught up. It is
// the same disruption as an online defragmentation for the budget
// (DisruptDefrag: one member out of service, caught up, the caught-up
// others a quorum of every voter, the leader last after a hand-off), and
// what it costs clients differs: a member defragmented online accepts
// connections and holds every request sent to it until it is done; a
// stopped one refuses connections, so round-robin clients (clientv3 as
// it comes, kube-apiserver's) send it nothing.

// defragWay says whether m is defragmented offline, and, for one due
// offline that cannot be, why online. The rules, in order (the order is
// the point):
//  1. Online under NOSPACE: the procedure defragments every member, its
//     steps are taken by the leader's agent alone without the lock
//     (etcd refuses the lock's lease), and writes are refused anyway,
//     so a member's stall costs no write.
//  2. Online when the spec says maintenance.defrag.offline: false.
//  3. Online in a one-voter cluster (granted only under NOSPACE): a
//     stopped member would serve not even reads.
//  4. Online when m's own agent does not run, or cannot (no live agent
//     record of m that says DefragOffline: an older agent, or one whose
//     last offline defragmentation failed): only it can stop m's etcd
//     and rewrite its data dir.
//  5. Offline.
func defragWay(b budget, m planMember, pol DefragPolicy) (offline bool, online string) {
	switch {
	case pol.noSpace, !pol.Offline, b.plan.view.Voters <= 1:
		return false, ""
	case b.agents == nil:
		return false, "online: the agents' records are not read"
	}
	for _, r := range b.agents {
		if r.MemberID == m.ID && r.DefragOffline {
			return true, ""
		}
	}
	if r, ok := agentOf(b.agents, m.ID); ok {
		return false, fmt.Sprintf("online: agent %s does not defragment offline (an older version, or its last offline defragmentation failed)", r.Name)
	}
	return false, fmt.Sprintf("online: %s's agent does not run", m.label)
}

// agentOf is the live agent record of member id.
func agentOf(recs []model.AgentRecord, id uint64) (model.AgentRecord, bool) {
	for _, r := range recs {
		if r.MemberID == id {
			return r, true
		}
	}
	return model.AgentRecord{}, false
}

// offlineElsewhere: step is an offline defragmentation of a member other
// than this agent's: that member's agent takes it, not the lock holder.
func offlineElsewhere(in Input, step Step) bool {
	return step.Kind == StepDefragOffline && (in.Local.Answer == nil || step.MemberID != in.Local.Answer.MemberID)
}

// defragOfflineStep is the maintenance step, step, for this agent's own
// member: under the lock, which it keeps until the member has caught up
// again (offlineReturning).
func defragOfflineStep(in Input, step Step, key string) Action {
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step, Topic: TopicMaintenance}
	}
	return Action{Kind: DoDefragOffline, Key: key, Step: step, Reason: step.Reason, Topic: TopicMaintenance}
}

// resumeOfflineDefrag is the rule of a stopped etcd whose offline
// defragmentation was cut short before its rewrite was over (this agent
// killed, or the rewrite failed): rewrite the db once more, then start.
// No lock is needed: the member is out of service already, every
// agent's budget counts it so (not serving), and the rewrite touches
// nothing but its own db. A rewrite that fails again is journaled as
// over all the same (the old db is whole), so the member never stays
// down for it.
func resumeOfflineDefrag(in Input) (Action, bool) {
	j := in.Local.OfflineDefrag
	if j == nil || j.Step == model.OfflineRewritten {
		return Action{}, false
	}
	return Action{Kind: DoResumeOffline, Key: "defrag-offline/resume/" + string(j.Step), Topic: TopicMaintenance,
		Reason: fmt.Sprintf("rewriting the db of my member %x offline: its offline defragmentation was cut short (journaled %s), etcd starts once it is over", j.MemberID, j.Step)}, true
}

// offlineReturning is the rule of a running etcd with an open offline
// defragmentation: the lock stays with it until the member is a
// caught-up voter again, as after a rolling restart; then the journal
// closes and the lock goes back.
func offlineReturning(in Input) (Action, bool) {
	j := in.Local.OfflineDefrag
	if j == nil {
		return Action{}, false
	}
	if back, why := caughtUpAgain(in); !back {
		return Action{Kind: DoWait, Key: "defrag-offline/returning", Topic: TopicMaintenance,
			Reason: fmt.Sprintf("waiting: defragmented offline; keeping the cluster lock until %s is a caught-up voter again: %s", in.Self.Name, why)}, true
	}
	return Action{Kind: DoEndOffline, Key: "defrag-offline/end", Topic: TopicMaintenance, ReleaseLock: true,
		Reason: fmt.Sprintf("defragmented %s offline: a caught-up voter again", in.Self.Name)}, true
}
