package recovery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Inspection is what one agent reports about its member for a recovery
// (GET /recovery on its endpoint). Unreachable agents are reported by the
// caller with Reachable false.
type Inspection struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	// Error is why the agent could not be asked, or what went wrong.
	Error string `json:"error,omitempty"`
	// EtcdRunning: the agent's etcd process runs.
	EtcdRunning bool `json:"etcdRunning"`
	// Data is the data dir: healthy, corrupt, empty, locked or unreadable
	// (an offline check), "serving" while etcd runs and answers, or
	// "running" while etcd runs without answering (started after the
	// quorum was lost, it cannot publish itself) and its WAL reads well.
	Data   string `json:"data"`
	Reason string `json:"reason,omitempty"`
	// ClusterID and MemberID are hex, as etcdctl prints them.
	ClusterID string `json:"clusterID,omitempty"`
	MemberID  string `json:"memberID,omitempty"`
	// Term and Index are the raft term and the committed index of the
	// member's data; Revision the newest revision in it.
	Term     uint64 `json:"term,omitempty"`
	Index    uint64 `json:"index,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// HealthyVoter: the member serves as a voter with a leader now.
	HealthyVoter bool `json:"healthyVoter"`
	// Snapshot is the newest verified scheduled snapshot on the host.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	// Recovery is the host's recovery journal, if it ever took part in one.
	Recovery *Journal `json:"recovery,omitempty"`
	// Voters is the voter list this host knows: its running etcd's member
	// list, else its data's (the db's members bucket, read offline), else
	// the agent's last observed view; VotersFrom says which (VotersEtcd,
	// VotersDB, VotersObserved). Empty when none could be read: a recovery
	// then counts on the spec and the other reports.
	Voters     []Voter `json:"voters,omitempty"`
	VotersFrom string  `json:"votersFrom,omitempty"`
}

// Snapshot is a verified snapshot file on a host.
type Snapshot struct {
	Path     string    `json:"path"`
	TakenAt  time.Time `json:"takenAt"`
	Revision int64     `json:"revision"`
	Keys     int       `json:"keys"`
	Size     int64     `json:"size"`
}

// Usable: the member's data can be a recovery's source.
func (i Inspection) Usable() bool {
	return i.Reachable && (i.Data == "healthy" || i.Data == "serving" || i.Data == "running") && i.Index > 0
}

// QuorumState is whether a quorum of voters is healthy now, as the caller
// observed the live cluster.
type QuorumState struct {
	Healthy bool
	// Detail says what was seen: "2 of 3 voters healthy", or why nothing
	// answered.
	Detail string
}

// Recommendation is the plan's advice.
type Recommendation struct {
	// Source is the member to recover from ("" when none is usable).
	Source string `json:"source,omitempty"`
	Why    string `json:"why"`
	// Loss says what recovering from Source would lose, one line each.
	Loss []string `json:"loss,omitempty"`
	// Snapshot is the newest verified snapshot anywhere, for a recovery
	// from a snapshot when no member's data is usable.
	Snapshot     *Snapshot `json:"snapshot,omitempty"`
	SnapshotHost string    `json:"snapshotHost,omitempty"`
}

// Recommend picks the usable data that goes furthest: the highest
// committed raft index (then revision, then the spec's order), and says
// what the others hold that it does not.
func Recommend(ins []Inspection, now time.Time) Recommendation {
	var r Recommendation
	for _, i := range ins {
		if i.Snapshot != nil && (r.Snapshot == nil || i.Snapshot.Revision > r.Snapshot.Revision) {
			r.Snapshot, r.SnapshotHost = i.Snapshot, i.Name
		}
	}
	var usable []Inspection
	for _, i := range ins {
		if i.Usable() {
			usable = append(usable, i)
		}
	}
	if len(usable) == 0 {
		r.Why = "no member's data is usable"
		if r.Snapshot != nil {
			r.Why += fmt.Sprintf(": recover from the newest verified snapshot, %s on %s (revision %d, taken %s ago), with --from-snapshot on that host",
				r.Snapshot.Path, r.SnapshotHost, r.Snapshot.Revision, now.Sub(r.Snapshot.TakenAt).Round(time.Second))
		} else {
			r.Why += " and no verified snapshot was found"
		}
		return r
	}
	// Stable: equal data keeps the spec's order.
	slices.SortStableFunc(usable, func(a, b Inspection) int {
		return cmp.Or(cmp.Compare(b.Index, a.Index), cmp.Compare(b.Revision, a.Revision))
	})
	best := usable[0]
	r.Source = best.Name
	r.Why = fmt.Sprintf("%s's data goes furthest among the usable: committed index %d, revision %d", best.Name, best.Index, best.Revision)
	for _, i := range ins {
		if i.Name == best.Name {
			continue
		}
		switch {
		case !i.Reachable:
			r.Loss = append(r.Loss, fmt.Sprintf("%s: its agent did not answer; what its data holds is unknown", i.Name))
		case i.Index > best.Index || i.Revision > best.Revision:
			r.Loss = append(r.Loss, fmt.Sprintf("%s (%s) reached index %d, revision %d: %d entries, %d revisions more than %s, lost",
				i.Name, i.Data, i.Index, i.Revision, sub(i.Index, best.Index), max(i.Revision-best.Revision, 0), best.Name))
		}
	}
	if r.Snapshot != nil && r.Snapshot.Revision < best.Revision {
		r.Loss = append(r.Loss, fmt.Sprintf("for comparison, the newest snapshot (%s, %s ago) is %d revisions behind %s",
			r.SnapshotHost, now.Sub(r.Snapshot.TakenAt).Round(time.Second), best.Revision-r.Snapshot.Revision, best.Name))
	}
	return r
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// CheckFrom says why a recovery from member source must not run, or nil:
// never while a quorum of voters is healthy (the cluster needs no
// recovery, and one would throw away its other members), never from data
// that is corrupt, empty or unknown.
func CheckFrom(ins []Inspection, source string, q QuorumState, id string) error {
	if err := CheckFromSnapshot(ins, q, id); err != nil {
		return err
	}
	idx := slices.IndexFunc(ins, func(i Inspection) bool { return i.Name == source })
	if idx < 0 {
		return fmt.Errorf("%s is not a member of the spec (members: %s)", source, names(ins))
	}
	i := ins[idx]
	switch {
	case !i.Reachable:
		return fmt.Errorf("%s's agent does not answer (%s): run recover on %s itself, or make its agent reachable (agent.recoveryAddr); nothing was changed", source, i.Error, source)
	case !i.Usable():
		why := i.Data
		if i.Reason != "" {
			why += ": " + i.Reason
		}
		return fmt.Errorf("%s's data cannot be a recovery's source (%s); choose another member, or --from-snapshot; nothing was changed", source, why)
	}
	return nil
}

// CheckFromSnapshot says why a recovery from a snapshot must not run now,
// or nil: not while a quorum of voters is healthy, nor while another
// recovery than id is under way on any host.
func CheckFromSnapshot(ins []Inspection, q QuorumState, id string) error {
	if q.Healthy {
		return fmt.Errorf("a quorum of voters is healthy (%s): the cluster needs no recovery; nothing was changed", q.Detail)
	}
	for _, i := range ins {
		if i.HealthyVoter {
			return fmt.Errorf("%s is a healthy voter: its cluster has a quorum; nothing was changed", i.Name)
		}
		if i.Recovery != nil && i.Recovery.Open() && i.Recovery.ID != id {
			return fmt.Errorf("%s takes part in recovery %s (%s, step %s): let it finish; nothing was changed", i.Name, i.Recovery.ID, i.Recovery.Role, i.Recovery.Step)
		}
	}
	return nil
}

func names(ins []Inspection) string {
	var out []string
	for _, i := range ins {
		out = append(out, i.Name)
	}
	return strings.Join(out, ", ")
}
