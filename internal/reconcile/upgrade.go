package reconcile

import (
	"fmt"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// The agent's own binary replaced on disk (a package upgrade) is one more
// reason for the rolling restart (rollingRestart, model.Restart.Agent):
// the agent stops etcd and execs the new binary in its turn. Two rules
// are its own: the preflight of the new binary's embedded etcd, and the
// end of the step in the new process.

// upgradeRefused says why the rolling restart must not restart onto the
// installed binary: its embedded etcd is one etcd refuses in this cluster
// (spec.Preflight: one minor at a time, 3.5.26 before 3.6; a downgrade
// goes on to etcdPreflight, which enables etcd's downgrade first). The
// old binary then keeps running on every host: each agent checks before
// it stops anything, also in a one-member cluster.
func upgradeRefused(in Input) string {
	b := in.Local.Binary
	if b.Installed == nil || b.External || in.Cluster == nil {
		return ""
	}
	move, why := preflightOnto(*in.Cluster, b.Installed.EtcdVersion)
	if move != spec.MoveRefused {
		return ""
	}
	return fmt.Sprintf("not restarting onto the installed etcdkeeper %s: %s; etcdkeeper %s keeps running (install a package whose etcd is at most one minor from the cluster's)", b.Installed, why, b.Running)
}

// startRefused is the same preflight for a start: the etcd the start
// would run (the embedded one of the file at the agent's path) against
// the live cluster's version. A new binary restarted by hand, or an old
// agent whose etcd exited after the file was replaced, starts no member
// that etcd would refuse; a downgrade only once etcd's downgrade is
// enabled for its minor.
func startRefused(in Input, d StartDecision) string {
	if d.Action == ActWait || d.Action == ActIdle || in.Cluster == nil {
		return ""
	}
	v := in.Local.Binary.StartEtcdVersion()
	if v == "" {
		return ""
	}
	move, why := preflightOnto(*in.Cluster, v)
	switch {
	case move == spec.MoveRefused:
		return "not starting the member: " + why
	case move == spec.MoveDowngrade && in.Cluster.DowngradeTarget != minorOf(v):
		return fmt.Sprintf("not starting the member: etcd %s is a downgrade of the cluster version %s, and etcd's downgrade to %s is not enabled (etcdctl downgrade enable %s first)",
			v, in.Cluster.Version, minorOf(v), minorOf(v))
	}
	return ""
}

// preflightOnto is spec.Preflight of etcd version to against the cluster
// as observed: its cluster version, and what each member runs.
func preflightOnto(c model.Cluster, to string) (spec.Move, string) {
	v, err := spec.ParseVersion(to)
	if err != nil {
		return spec.MoveRefused, fmt.Sprintf("cannot tell the new etcd's version: %v", err)
	}
	cluster, _ := spec.ParseVersion(c.Version)
	var running []spec.Version
	var lowest spec.Version
	for _, m := range c.Members {
		if mv, err := spec.ParseVersion(m.Version); err == nil {
			running = append(running, mv)
			if lowest.Zero() || mv.Less(lowest) {
				lowest = mv
			}
		}
	}
	// A cluster just formed reports etcd's placeholder cluster version
	// (3.0.0) until its leader decides it: the lowest minor its members
	// run. Judged against the placeholder, every member joining then
	// would be refused. Only a downgrade lowers it below what they run.
	if !lowest.Zero() && c.DowngradeTarget == "" && minorLess(cluster, lowest) {
		cluster = spec.Version{Major: lowest.Major, Minor: lowest.Minor}
	}
	return spec.Preflight(cluster, v, running)
}

func minorLess(a, b spec.Version) bool {
	return a.Major < b.Major || (a.Major == b.Major && a.Minor < b.Minor)
}

func minorOf(v string) string {
	pv, err := spec.ParseVersion(v)
	if err != nil {
		return v
	}
	return pv.MinorString()
}

// finishUpgrade ends the restart onto a new binary in the new process
// (model.Upgraded, journaled by the old one): it waits until this member
// is a caught-up healthy voter again — keeping the cluster lock the old
// process took, if it could resume it — then closes the journal and gives
// the lock back, and the next member may go. Without the lock (its lease
// ran out during the exec), the next member still waits: its own rule
// wants the others a quorum of caught-up voters, which this one is not
// until it has caught up.
func finishUpgrade(in Input) (Action, bool) {
	u := in.Local.Upgraded
	if u == nil {
		return Action{}, false
	}
	what := fmt.Sprintf("restarted onto etcdkeeper %s", u.To)
	c := in.Cluster
	if c == nil {
		return wait("upgrade-no-view", "%s; cannot observe the cluster to tell whether this member has caught up", what), true
	}
	m, ok := c.Member(in.Local.Answer.MemberID)
	if !ok || (!m.CaughtUp && len(c.Members) > 1) {
		lag := m.Lag
		if lag == "" {
			lag = in.Self.Name + " is not caught up with the leader"
		}
		held := "keeping the cluster lock until it has"
		if !u.Lock {
			held = "the next member waits until it has"
		}
		act := wait("upgrade-catching-up", "%s, catching up (%s caught up): %s", what, held, lag)
		act.Rollout = &model.RolloutNote{CatchingUp: true}
		return act, true
	}
	return Action{Kind: DoFinishUpgrade, Key: "finish-upgrade", ReleaseLock: true,
		Reason: fmt.Sprintf("%s: %s is a caught-up healthy voter again (was %s)", what, in.Self.Name, u.From)}, true
}
