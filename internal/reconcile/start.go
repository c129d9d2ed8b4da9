// Package reconcile holds the agent's decisions as pure functions: how the
// local member starts (DecideStart) and which single membership change
// comes next (Plan). They take plain values and return a value with a
// reason; the agent observes and acts.
package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// StartInput is everything DecideStart looks at.
type StartInput struct {
	Self   spec.Member
	InSpec bool
	// SpecSize is how many members the spec lists.
	SpecSize int
	Data     model.Data
	// ExitCorrupt: etcd's last exit was classified as corruption that the
	// data dir check may not see (e.g. "data inconsistency with peers").
	ExitCorrupt bool
	ExitReason  string
	// Marker is nil when this host never ran a member of the cluster.
	Marker *model.Marker
	// Cluster is the live cluster seen through the peers; nil when none
	// answered with a leader.
	Cluster *model.Cluster
	// PeerAnswered, when Cluster is nil, is the evidence that some peer
	// is alive anyway: it answered without a leader, or refused us (TLS,
	// auth). Empty when no peer could be reached at all.
	PeerAnswered string
	// RepairBlocked is non-empty when moving data is not allowed now
	// (repair disabled, rate limited): the reason.
	RepairBlocked string
	// DataUnmounted is non-empty when the empty data dir looks like a
	// mount point without its filesystem (see Unmounted): the evidence.
	DataUnmounted string
	// AddBlocked is non-empty when this host may not be added to the
	// cluster again now (every add of the last hour counts toward
	// repair.maxPerHour): the reason.
	AddBlocked string
	// Fence is this host's part in a recovery from quorum loss: while it
	// is fenced, its old member is never started (see fenceStart).
	Fence model.Recovery
}

// StartAction is what to do about a local member that is not running.
type StartAction int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=StartAction -linecomment
const (
	// ActWait: do nothing now; look again later.
	ActWait StartAction = iota // wait
	// ActStartAsIs: start etcd on the data dir as it is.
	ActStartAsIs // start
	// ActStartNew: form the cluster from the spec (never-joined host only).
	ActStartNew // start-new
	// ActRejoin: the one rejoin path: remove stale self, move data aside,
	// add as learner, start existing.
	ActRejoin // rejoin
	// ActIdle: not in the spec and not in the cluster: stay stopped.
	ActIdle // idle
)

// StartDecision is DecideStart's answer.
type StartDecision struct {
	Action StartAction
	// MoveData: the rejoin must move a non-empty data dir aside first.
	MoveData bool
	// Repair: the rejoin replaces data that etcd cannot use (corrupt, or a
	// removed/foreign identity); it counts against the repair rate limit.
	Repair bool
	// StaleID is the cluster's entry for this host that must be removed
	// before adding it again (0: none).
	StaleID uint64
	// RepairRefused: the data needs a repair that a guard (repair
	// disabled, rate limit, free space) refuses: the operator is alerted.
	RepairRefused bool
	// ReuseID is an unstarted entry with this host's peer URLs that the
	// rejoin takes over instead of adding a new one (0: none).
	ReuseID uint64
	Reason  string
}

// DecideStart decides how the local member starts. Guard clauses, in
// order of precedence; each returns with the reason.
func DecideStart(in StartInput) StartDecision {
	if in.Data.Kind == model.DataLocked {
		return startWait("data dir is locked by another process (a leftover etcd?): %s", in.Data.Reason)
	}
	if in.Data.Kind == model.DataUnreadable {
		return startWait("data dir cannot be read, fix it by hand (permissions, disk); nothing is moved: %s", in.Data.Reason)
	}
	if d, fenced := fenceStart(&in); fenced {
		return d
	}
	if why := otherCluster(in); why != "" {
		return startWait("%s", why)
	}
	if !in.InSpec {
		return decideNotInSpec(in)
	}
	corrupt := in.Data.Kind == model.DataCorrupt || (in.Data.Kind == model.DataHealthy && in.ExitCorrupt)
	switch {
	case corrupt:
		return decideCorrupt(in)
	case in.Data.Kind == model.DataHealthy:
		return decideHealthy(in)
	default:
		return decideEmpty(in)
	}
}

// otherCluster says why the live cluster cannot be taken for the one this
// host belongs to, or "": its endpoints disagree on the cluster ID, or the
// data dir or the marker belong to another cluster. Acting on the wrong
// cluster (removing "our" entry, moving "stale" data aside) is how a
// mistake on one host spreads: wait for a human instead.
func otherCluster(in StartInput) string {
	c := in.Cluster
	if c == nil {
		return ""
	}
	if len(c.Foreign) > 0 {
		return fmt.Sprintf("the cluster's endpoints disagree on its ID (%s): nothing is removed or moved", strings.Join(c.Foreign, "; "))
	}
	const what = "the peers answer for cluster %x, but %s belongs to cluster %x: another cluster at the spec's URLs? Nothing is removed or moved; if the cluster was rebuilt on purpose, move %s aside by hand"
	// A fenced host's data and marker belong to the cluster that lost its
	// quorum; the recovered one may have a new ID (from a snapshot).
	recovered := func(id uint64) bool {
		return in.Fence.Fenced() && (in.Fence.OldClusterID == 0 || in.Fence.OldClusterID == id)
	}
	if id := in.Data.ClusterID; id != 0 && id != c.ClusterID && !recovered(id) {
		return fmt.Sprintf(what, c.ClusterID, "the data dir", id, "the data dir")
	}
	if in.Marker != nil && in.Marker.ClusterID != 0 && in.Marker.ClusterID != c.ClusterID && !recovered(in.Marker.ClusterID) {
		return fmt.Sprintf(what, c.ClusterID, "this host's marker", in.Marker.ClusterID, "the agent's state dir")
	}
	return ""
}

func decideNotInSpec(in StartInput) StartDecision {
	d := decideNotInSpecData(in)
	if d.MoveData && in.RepairBlocked != "" {
		// Moving a dropped host's data is a data move like a repair's:
		// the same guards hold it back.
		w := startWait("%s; not moving its data aside: %s", d.Reason, in.RepairBlocked)
		w.RepairRefused = true
		return w
	}
	return d
}

func decideNotInSpecData(in StartInput) StartDecision {
	// Corrupt as DecideStart judges it for a member the spec lists.
	corrupt, why := in.Data.Kind == model.DataCorrupt, in.Data.Reason
	if in.Data.Kind == model.DataHealthy && in.ExitCorrupt {
		corrupt, why = true, in.ExitReason
	}
	switch {
	case corrupt && in.Cluster == nil:
		// The same rule as for a corrupt member the spec lists: without a
		// healthy quorum this data may be what a manual recovery needs,
		// in place.
		return startWait("quorum lost: manual recovery needed: %s is not in the spec and its data is corrupt (%s), and no healthy quorum of peers answers: nothing is moved",
			in.Self.Name, why)
	case corrupt:
		// Never started: the lock holder removes its member, if still
		// listed, like any dead member the spec no longer lists.
		return StartDecision{Action: ActIdle, MoveData: true,
			Reason: fmt.Sprintf("%s is not in the spec and its data is corrupt (%s): idle, data moved aside, until the spec lists it again", in.Self.Name, why)}
	case in.Data.Kind == model.DataHealthy && (in.Cluster == nil || in.Cluster.Listed(in.Data.MemberID)):
		// The lock holder removes this member in order, quorum-safely;
		// until then it keeps serving.
		return StartDecision{Action: ActStartAsIs, Reason: fmt.Sprintf("%s is not in the spec but still a member: running until the cluster removes it", in.Self.Name)}
	}
	return StartDecision{Action: ActIdle, MoveData: in.Data.Kind != model.DataEmpty,
		Reason: fmt.Sprintf("%s is not in the spec and not a member: idle until the spec lists it again", in.Self.Name)}
}

func decideHealthy(in StartInput) StartDecision {
	if in.Cluster == nil {
		return StartDecision{Action: ActStartAsIs, Reason: "data dir holds a member; starting it as it is"}
	}
	if in.Data.MemberID == 0 || (in.Cluster.ClusterID == in.Data.ClusterID && in.Cluster.Listed(in.Data.MemberID)) {
		return StartDecision{Action: ActStartAsIs, Reason: "data dir holds a member of the live cluster; starting it as it is"}
	}
	why := fmt.Sprintf("data dir holds member %x of cluster %x, which the live cluster %x does not list (removed, or another cluster's data)",
		in.Data.MemberID, in.Data.ClusterID, in.Cluster.ClusterID)
	return rejoin(in, true, why)
}

func decideCorrupt(in StartInput) StartDecision {
	why := in.Data.Reason
	if in.Data.Kind != model.DataCorrupt {
		why = in.ExitReason
	}
	if in.SpecSize <= 1 {
		return startWait("data is corrupt (%s) and this is a one-member cluster: there is nothing to rejoin; restore from a snapshot by hand", why)
	}
	if in.Cluster == nil {
		return startWait("quorum lost: manual recovery needed: data is corrupt (%s) and no healthy quorum of peers answers", why)
	}
	return rejoin(in, true, "data is corrupt: "+why)
}

// Unmounted reports whether a data dir on device current, inside a parent
// dir on device parent, looks like a mount point whose filesystem is not
// mounted, given that the member ran on device recorded: it now sits on
// its parent's filesystem, where the member's never did. A new filesystem
// mounted there (a replaced disk) is another device, not the parent's.
func Unmounted(recorded, current, parent uint64) bool {
	return recorded != 0 && current != recorded && current == parent
}

func decideEmpty(in StartInput) StartDecision {
	if in.DataUnmounted != "" {
		// An unmounted disk looks empty: rejoining would replace a member
		// whose data is intact, one mount away.
		return startWait("data dir not mounted? It is empty, but %s: mount it, or move the agent's state dir aside if the disk is gone for good", in.DataUnmounted)
	}
	if in.Cluster != nil {
		return rejoin(in, false, "data dir is empty and the cluster is live: joining it")
	}
	if in.PeerAnswered != "" {
		// A peer that answers but cannot be used (no leader yet, our
		// certificate or password refused) is a cluster we must not
		// fork by forming a new one next to it.
		return startWait("data dir is empty and a peer answers but the cluster cannot be joined now (%s): never bootstrapping a new cluster next to it", in.PeerAnswered)
	}
	if in.Marker != nil {
		// --initial-cluster-state new on an empty data dir of a known member
		// forms a second cluster with the same IDs: never.
		return startWait("data dir is empty but this host was member %x of cluster %x: waiting for peers to rejoin, never bootstrapping a new cluster",
			in.Marker.MemberID, in.Marker.ClusterID)
	}
	return StartDecision{Action: ActStartNew, Reason: "data dir is empty, no peer answers and this host never joined: forming the cluster from the spec"}
}

// rejoin checks that the one rejoin path is safe now and fills in which
// entry it removes or reuses.
func rejoin(in StartInput, moveData bool, why string) StartDecision {
	if moveData && in.RepairBlocked != "" {
		d := startWait("%s; not repairing: %s", why, in.RepairBlocked)
		d.RepairRefused = true
		return d
	}
	d := StartDecision{Action: ActRejoin, MoveData: moveData, Repair: moveData, Reason: why}
	stale, reuse := selfEntries(in)
	d.ReuseID = reuse
	if reuse == 0 && in.AddBlocked != "" {
		return startWait("%s; not adding this host again: %s", why, in.AddBlocked)
	}
	if stale == nil {
		return d
	}
	if why := claimed(in, *stale); why != "" {
		return startWait("%s", why)
	}
	d.StaleID = stale.ID
	if !stale.IsLearner {
		if ok, detail := model.NewView(*in.Cluster, nil).ServesWithout(stale.ID); !ok {
			return startWait("quorum lost: manual recovery needed: %s; removing my old member %x would leave %s", why, stale.ID, detail)
		}
	}
	return d
}

// StaleGrace is how long an entry with this host's name or peer URLs must
// go without answering before a host that cannot prove it its own (no
// data, no marker of that member) replaces it.
const StaleGrace = 30 * time.Second

// claimed says why this host must not remove the entry stale, or "". A
// member that answers as itself runs somewhere — a cloned machine, new
// hardware while the old host still runs — and is never removed to make
// room. One that does not answer is this host's own when the data dir or
// the marker holds its ID (its etcd is down because this agent stopped
// it); otherwise it gets StaleGrace to come back.
func claimed(in StartInput, stale model.Member) string {
	url := "its peer URLs " + strings.Join(stale.PeerURLs, ",")
	if len(stale.ClientURLs) > 0 {
		url = stale.ClientURLs[0]
	}
	if stale.Healthy {
		return fmt.Sprintf("%s already runs as member %x at %s; another host claims this name: not removing it (check this host's --name and spec)",
			in.Self.Name, stale.ID, url)
	}
	ours := stale.ID == in.Data.MemberID || (in.Marker != nil && in.Marker.MemberID == stale.ID)
	if ours || stale.Unstarted() || stale.IsLearner {
		return ""
	}
	if stale.DownSince.IsZero() || in.Cluster.Now.Sub(stale.DownSince) < StaleGrace {
		down := time.Duration(0)
		if !stale.DownSince.IsZero() {
			down = in.Cluster.Now.Sub(stale.DownSince).Round(time.Second)
		}
		return fmt.Sprintf("%s is member %x at %s, not answering for %s; this host holds no data of it: replacing it after %s without an answer",
			in.Self.Name, stale.ID, url, down, StaleGrace)
	}
	return ""
}

// selfEntries finds the cluster's entries for this host: a started one
// (stale: its data is gone or unusable) and an unstarted one with our peer
// URLs (added but never started: reusable).
func selfEntries(in StartInput) (stale *model.Member, reuse uint64) {
	var oldIDs []uint64
	if in.Data.MemberID != 0 {
		oldIDs = append(oldIDs, in.Data.MemberID)
	}
	if in.Marker != nil {
		oldIDs = append(oldIDs, in.Marker.MemberID)
	}
	for i := range in.Cluster.Members {
		m := &in.Cluster.Members[i]
		mine := m.Name == in.Self.Name || samePeerURLs(m.PeerURLs, in.Self.PeerURLs) || slices.Contains(oldIDs, m.ID)
		if !mine {
			continue
		}
		if m.Name == "" && samePeerURLs(m.PeerURLs, in.Self.PeerURLs) && !slices.Contains(oldIDs, m.ID) {
			reuse = m.ID
			continue
		}
		stale = m
	}
	return stale, reuse
}

func startWait(format string, args ...any) StartDecision {
	return StartDecision{Action: ActWait, Reason: fmt.Sprintf(format, args...)}
}
