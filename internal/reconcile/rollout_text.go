package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// RolloutText says where a rollout stands, from the agents' records, for
// STATUS, `etcdkeeper status` and `plan`: "rolling etcd 3.6.16 → 3.7.3:
// node2 done, node3 restarting, node1 (leader) last"; "" when no agent
// has a restart pending, nor is etcd's downgrade enabled.
func RolloutText(c model.Cluster, recs []model.AgentRecord) string {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b model.AgentRecord) int { return strings.Compare(a.Name, b.Name) })
	why, agent := "", false
	for _, r := range recs {
		if r.RestartPending != "" {
			why, agent = r.RestartPending, r.RestartAgent
			break
		}
	}
	var b strings.Builder
	if c.DowngradeTarget != "" {
		fmt.Fprintf(&b, "etcd's downgrade to %s is enabled (cluster version %s)", c.DowngradeTarget, c.Version)
		if why == "" {
			return b.String()
		}
		b.WriteString("; ")
	}
	if why == "" {
		return ""
	}
	fmt.Fprintf(&b, "rolling %s:", why)
	var parts []string
	for _, r := range recs {
		leads := r.MemberID != 0 && r.MemberID == c.LeaderID
		var state string
		switch {
		case model.Phase(r.Phase) == model.PhaseStarting:
			state = "restarting"
		case r.Rollout != nil && r.Rollout.CatchingUp:
			// The new binary's process (finishUpgrade), not caught up yet.
			state = "restarted onto " + r.Version
			if r.EtcdVersion != "" {
				state += " (etcd " + r.EtcdVersion + ")"
			}
			state += ", catching up"
		case r.RestartPending != "" && leads:
			state = "(leader) last"
		case r.RestartPending != "" && r.Rollout != nil && r.Rollout.Held:
			state = "held: " + r.Rollout.HeldOn
		case r.RestartPending != "":
			state = "pending"
		default:
			state = "done"
			switch {
			case agent && r.Version != "":
				// An agent binary's rollout: the version it runs now.
				state = "on " + r.Version
				if r.EtcdVersion != "" {
					state += " (etcd " + r.EtcdVersion + ")"
				}
			case r.EtcdVersion != "":
				state += " (etcd " + r.EtcdVersion + ")"
			}
		}
		parts = append(parts, r.Name+" "+state)
	}
	b.WriteString(" " + strings.Join(parts, ", "))
	return b.String()
}

// PreflightErrors is `etcdkeeper plan`'s preflight of the spec's etcd
// (version want, its etcd.binary's or the built-in one's) against the
// observed cluster (spec.Preflight), as FILE:LINE errors naming the
// versions; nil when the move is allowed (or no version is known).
func PreflightErrors(s *spec.Spec, obs model.Cluster, want spec.Version) []string {
	cluster, err := spec.ParseVersion(obs.Version)
	if err != nil || want.Zero() {
		return nil
	}
	var running []spec.Version
	for _, m := range obs.Members {
		if v, err := spec.ParseVersion(m.Version); err == nil {
			running = append(running, v)
		}
	}
	what := "etcd.binary"
	if s.Etcd.Binary == "" {
		what = "etcd (built in)"
	}
	line := max(s.Etcd.Line, 1)
	switch move, why := spec.Preflight(cluster, want, running); move {
	case spec.MoveRefused:
		return []string{fmt.Sprintf("%s:%d: %s: refused: %s", s.Path, line, what, why)}
	case spec.MoveDowngrade:
		return []string{fmt.Sprintf("%s:%d: %s: etcd %s is a downgrade of the cluster version %s: the agents enable etcd's downgrade, then roll back one member at a time", s.Path, line, what, want, obs.Version)}
	}
	return nil
}
