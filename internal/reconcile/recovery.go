package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// The recovery steps the agent journals (recovery.Step's values).
const (
	recoveryForced = "forced"
	recoveryLed    = "led"
)

// decideRecovery is the decision of a host that takes part in a recovery
// from quorum loss (etcdkeeper recover --yes). ok is false when the
// ordinary decision applies: a fenced host's new member joining the
// recovered cluster is promoted and finishes its rejoin like any other.
func decideRecovery(in Input) (Action, bool) {
	r := in.Local.Recovery
	if r.Role == model.RecoverySource {
		return decideSource(in), true
	}
	return decideFenced(in)
}

// decideSource restarts the source's etcd as a one-member cluster: stop
// the old etcd, refuse if a quorum of voters turns out to be healthy (or
// the data is not usable), then force the new cluster (or restore the
// snapshot), and finish once the member leads it.
func decideSource(in Input) Action {
	r, l := in.Local.Recovery, in.Local
	what := fmt.Sprintf("recovery %s from %s", r.ID, in.Self.Name)
	if r.FromSnapshot {
		what = fmt.Sprintf("recovery %s from a snapshot on %s", r.ID, in.Self.Name)
	}
	if !l.Running && l.RestartIn > 0 {
		return wait("backoff", "%s: restart backoff after %s (%s)", what, l.LastExit.Text, l.LastExit.Class)
	}
	forced := r.Step == recoveryForced || r.Step == recoveryLed
	if forced {
		switch {
		case l.Running && l.Answer.ServingVoter():
			return Action{Kind: DoFinishRecovery, Reason: fmt.Sprintf("%s: done, member %x serves the recovered cluster; the other members rejoin it", what, l.Answer.MemberID),
				Key: "recovery/finish", ReleaseLock: true}
		case l.Running:
			return wait("recovery/serve", "%s: waiting for etcd to serve as the leader of a one-member cluster", what)
		case in.Cluster != nil && in.Cluster.Listed(l.Data.MemberID):
			// The forced start took, and members rejoined before this agent
			// stopped: forcing again would drop them.
			return Action{Kind: DoStart, Start: StartDecision{Action: ActStartAsIs}, Key: "recovery/start",
				Reason: fmt.Sprintf("%s: the recovered cluster answers and lists my member %x: starting it as it is", what, l.Data.MemberID)}
		case in.Cluster != nil:
			return wait("recovery/other-cluster", "%s: cluster %x answers with a leader and does not list my member %x: not forcing a second cluster next to it; check the hosts (etcdkeeper recover --config F shows them)",
				what, in.Cluster.ClusterID, l.Data.MemberID)
		}
		if took := forcedTook(r, l.Data); took != "" {
			// No cluster in sight (a partition, the others down) and a
			// journal the finish could not close: a second forced start
			// would drop the members that joined since, and serve next to
			// them once the partition heals.
			return Action{Kind: DoStart, Start: StartDecision{Action: ActStartAsIs}, Key: "recovery/start-forced",
				Reason: fmt.Sprintf("%s: %s: starting it as it is, never forcing twice", what, took)}
		}
		// The forced start never took (etcd did not start, or died before
		// it wrote the removal of the others): again.
	}
	if c := in.Cluster; c != nil && !forced {
		if v := model.NewView(*c, nil); v.Serving >= v.Quorum {
			voters, healthy := v.Voters, v.Serving
			changed := "nothing was changed"
			if r.Step == "moved" || r.Step == "restored" {
				changed = "the data dir was moved aside already (kept; see the recovery journal): this member rejoins the live cluster"
			}
			return Action{Kind: DoRefuseRecovery, Reason: fmt.Sprintf("%s refused: %d of %d voters of cluster %x are healthy, a quorum: the cluster needs no recovery; %s",
				what, healthy, voters, c.ClusterID, changed), Key: "recovery/refuse"}
		}
	}
	// Stopped only after that check: a stopped source cannot count itself
	// among the healthy voters it refuses for. And, as a fence, only once
	// its member, asked at this pass, has had no leader for FenceNoLeader:
	// the cluster's look above is skipped while it has none.
	if l.Running && !forced {
		if a := l.Answer; a != nil && a.Leader != 0 {
			return Action{Kind: DoRefuseRecovery, Reason: fmt.Sprintf("%s refused: my member %x has a leader (%x): its cluster has a quorum and needs no recovery; nothing was changed",
				what, a.MemberID, a.Leader), Key: "recovery/refuse"}
		}
		if l.LeaderlessFor < FenceNoLeader {
			return wait("recovery/source-no-leader", "%s: my member has had no leader for %s; it is stopped only after %s without one",
				what, l.LeaderlessFor.Round(time.Millisecond), FenceNoLeader)
		}
		return Action{Kind: DoStopForRecovery, Reason: what + ": stopping etcd to restart it as a one-member cluster", Key: "recovery/stop"}
	}
	if r.FromSnapshot {
		return Action{Kind: DoRestoreSnapshot, Reason: what + ": restoring the snapshot as a new one-member cluster", Key: "recovery/restore"}
	}
	if !forced && l.Data.Kind != model.DataHealthy {
		return Action{Kind: DoRefuseRecovery, Reason: fmt.Sprintf("%s refused: the data dir is %s (%s), it cannot be the source; nothing was changed",
			what, l.Data.Kind, l.Data.Reason), Key: "recovery/refuse"}
	}
	return Action{Kind: DoForceNewCluster, Reason: what + ": starting etcd from its own data as a one-member cluster (--force-new-cluster)", Key: "recovery/force"}
}

// forcedTook says how the source's data shows that its forced start took
// (its member led a cluster of its own), or "" when it may not have: the
// journal says it led, or the data's membership is no longer the one it
// was forced from (the others removed, new members joined). When the
// journal does not say what it was forced from, any other member the data
// lists counts: never forcing twice is the safe side.
func forcedTook(r model.Recovery, d model.Data) string {
	if r.Step == recoveryLed {
		return "the journal says the forced start led already"
	}
	if d.Members == nil || d.MemberID == 0 {
		return ""
	}
	var others, joined []string
	for _, id := range d.Members {
		if id == d.MemberID {
			continue
		}
		others = append(others, fmt.Sprintf("%x", id))
		if r.ForcedFrom != nil && !slices.Contains(r.ForcedFrom, id) {
			joined = append(joined, fmt.Sprintf("%x", id))
		}
	}
	switch {
	case len(others) == 0:
		return fmt.Sprintf("my data lists my member %x alone: the forced start took", d.MemberID)
	case r.ForcedFrom == nil:
		return fmt.Sprintf("my data lists members %s besides mine and the journal does not say which it was forced from", strings.Join(others, ", "))
	case len(joined) > 0:
		return fmt.Sprintf("my data lists members %s, which joined after the forced start", strings.Join(joined, ", "))
	}
	return ""
}

// FenceNoLeader is how long a fenced host's old member must have had no
// leader, asked at each pass, before the fence stops it: several of
// etcd's election timeouts (1 s by default), so that an election (a
// leader's restart, a leader move) is never taken for a lost quorum.
const FenceNoLeader = 3 * time.Second

// decideFenced keeps a fenced host's old member stopped, but only while
// its cluster has lost its quorum: a fence is an order to stand aside for
// a recovery, and a cluster with a quorum needs none. So the old member
// is stopped only once it has had no leader for FenceNoLeader, and the
// fence is called off when it answers with a leader, or, stopped, when
// the cluster that answers has a healthy quorum and still lists it. Its
// new member, once it runs, follows the ordinary decisions; the recovery
// is done for this host when that member is a healthy voter and its
// rejoin is closed.
func decideFenced(in Input) (Action, bool) {
	r, l := in.Local.Recovery, in.Local
	if !l.Running {
		return fenceNeeded(in) // else DecideStart, with the fence (startInput)
	}
	if runsOldMember(l, r) {
		return fenceRunning(in), true
	}
	if a := l.Answer; a.ServingVoter() && !l.Journal.Open() {
		return Action{Kind: DoFinishRecovery, Reason: fmt.Sprintf("recovery %s: done here, member %x is a voter of the recovered cluster", r.ID, a.MemberID),
			Key: "recovery/finish", ReleaseLock: true}, true
	}
	return Action{}, false
}

// fenceRunning decides on a fenced host's old member that still runs:
// asked at this pass, with a leader it stays and the fence ends; without
// one for FenceNoLeader it is stopped; before that, wait.
func fenceRunning(in Input) Action {
	r, l := in.Local.Recovery, in.Local
	what := fmt.Sprintf("fenced by recovery %s from %s", r.ID, r.Source)
	if a := l.Answer; a != nil && a.Leader != 0 {
		return Action{Kind: DoEndFence, Key: "recovery/fence-end",
			Reason: fmt.Sprintf("%s: my member %x has a leader (%x): its cluster has a quorum and needs no recovery; the fence is called off, the member keeps running", what, a.MemberID, a.Leader)}
	}
	if l.LeaderlessFor < FenceNoLeader {
		return wait("recovery/fence-no-leader", "%s: my member %x has had no leader for %s; it is stopped only after %s without one",
			what, r.OldMemberID, l.LeaderlessFor.Round(time.Millisecond), FenceNoLeader)
	}
	return Action{Kind: DoStopForRecovery, Reason: fmt.Sprintf("%s: my old member %x has had no leader for %s: stopping it for good; it rejoins the recovered cluster",
		what, r.OldMemberID, l.LeaderlessFor.Round(time.Millisecond)), Key: "recovery/fence-stop", ReleaseLock: true}
}

// fenceNeeded calls off the fence of a stopped old member whose cluster
// answers with a healthy quorum and still lists it: no recovery happened
// (a recovered cluster never lists a fenced member's old ID: the forced
// start drops every other member before it serves, a restored snapshot
// is a new cluster), so the member starts again as it was.
func fenceNeeded(in Input) (Action, bool) {
	r, c := in.Local.Recovery, in.Cluster
	if c == nil || r.OldMemberID == 0 || !c.Listed(r.OldMemberID) {
		return Action{}, false
	}
	v := model.NewView(*c, nil)
	if ok, _ := v.HasQuorum(); !ok {
		return Action{}, false
	}
	voters, healthy := v.Voters, v.Serving
	return Action{Kind: DoEndFence, Key: "recovery/fence-end",
		Reason: fmt.Sprintf("fenced by recovery %s from %s: cluster %x has a quorum (%d of %d voters healthy) and lists my member %x: no recovery is needed; the fence is called off, the member starts again",
			r.ID, r.Source, c.ClusterID, healthy, voters, r.OldMemberID)}, true
}

// runsOldMember: the running etcd is the member the fence stopped for
// good: it answers as it, or, silent, it is not a rejoin's new member and
// the marker still names the old one.
func runsOldMember(l model.Local, r model.Recovery) bool {
	switch {
	case l.Answer != nil:
		return l.Answer.MemberID == r.OldMemberID
	case l.Journal.Open():
		return false
	}
	return l.Marker == nil || l.Marker.MemberID == r.OldMemberID
}

// fenceStart is DecideStart's guard for a fenced host: its old member is
// never started as it was, and nothing is formed; the host waits until the
// recovered cluster answers with the source in it, then rejoins it. The
// operator asked for this, so the repair rate limit does not hold it back.
func fenceStart(in *StartInput) (StartDecision, bool) {
	f := in.Fence
	if !f.Fenced() {
		return StartDecision{}, false
	}
	in.RepairBlocked, in.AddBlocked = "", ""
	why := fmt.Sprintf("fenced by recovery %s from %s: never starting my old member", f.ID, f.Source)
	c := in.Cluster
	if c == nil {
		return startWait("%s; waiting for the recovered cluster to answer", why), true
	}
	if !listsHealthy(c, f.Source) {
		return startWait("%s; the cluster that answers (%x) does not list %s as a healthy member: waiting for the recovered cluster", why, c.ClusterID, f.Source), true
	}
	if in.Data.MemberID != 0 && in.Data.MemberID == f.OldMemberID && c.Listed(f.OldMemberID) {
		return startWait("%s; the recovered cluster still lists it (%x): waiting", why, f.OldMemberID), true
	}
	return StartDecision{}, false
}

func listsHealthy(c *model.Cluster, name string) bool {
	for _, m := range c.Members {
		if m.Name == name && m.Healthy {
			return true
		}
	}
	return false
}

// lateFence: this host was off while the cluster was recovered from
// quorum loss (its data or marker belongs to the cluster that lost it, and
// the live cluster's recovery record says so): it takes its part as a
// fenced host, as if recover had reached it, and rejoins.
func lateFence(in Input) (Action, bool) {
	l, c := in.Local, in.Cluster
	if l.Recovery.Open() || c == nil || c.Recovered == nil {
		return Action{}, false
	}
	r := c.Recovered
	if r.ClusterID != c.ClusterID || r.OldClusterID == 0 || r.ID == l.Recovery.ID {
		return Action{}, false
	}
	ours := l.Data.ClusterID == r.OldClusterID || (l.Marker != nil && l.Marker.ClusterID == r.OldClusterID) ||
		(l.Answer != nil && l.Answer.ClusterID == r.OldClusterID)
	if !ours {
		return Action{}, false
	}
	return Action{Kind: DoAcceptFence, Recovered: r, Key: "recovery/late-fence",
		Reason: fmt.Sprintf("cluster %x was recovered from %s (recovery %s) while this host was away; my data belongs to cluster %x: fencing my old member, it rejoins the recovered cluster",
			c.ClusterID, r.Source, r.ID, r.OldClusterID)}, true
}
