package model

import (
	"fmt"
	"time"
)

// Member is one member as the cluster lists it, with what its own client
// URL answered when asked for its status.
type Member struct {
	ID         uint64
	Name       string // "" when added but never started
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
	// Healthy: the member answered as itself within the deadline, knows a
	// leader, and reports no alarm (see Healthy).
	Healthy   bool
	Leader    uint64
	RaftIndex uint64
	RaftTerm  uint64
	// DBSize is the size of its db file; DBSizeInUse what the keys in it
	// take (the rest is free pages only a defragmentation gives back);
	// Quota its quota-backend-bytes as it reports it (DefaultQuota when
	// it does not say). Zero when it gave no status answer.
	DBSize      int64
	DBSizeInUse int64
	Quota       int64
	Version     string
	// DowngradeTarget is the minor its status says etcd's downgrade is
	// enabled to ("": none).
	DowngradeTarget string
	// Alarms are the cluster's active alarms that name this member.
	Alarms []Alarm
	// Err says why the status call gave no usable answer ("" when it did).
	Err string
	// PendingSince is when the agent first saw the member as a learner or
	// unstarted; zero if it is neither (or nobody tracked it).
	PendingSince time.Time
	// DownSince is when the agent first saw the started member unhealthy;
	// zero while it is healthy (or nobody tracked it).
	DownSince time.Time
	// Behind is how many entries its committed index trails the leader's;
	// Rising, that the index rose since the previous observation;
	// IndexSince, since when it has had this index (zero: observed once).
	// CaughtUp is the rule of that name; Lag says why a healthy member is
	// not caught up. Set by Progress.Stamp.
	Behind     uint64
	Rising     bool
	IndexSince time.Time
	CaughtUp   bool
	Lag        string
}

// DefaultQuota is etcd's quota-backend-bytes when none is set: 2 GiB.
const DefaultQuota = 2 << 30

// FreeBytes is what a defragmentation of m would give back.
func (m Member) FreeBytes() int64 { return max(0, m.DBSize-m.DBSizeInUse) }

// FreeRatio is the fraction of m's db file that is free (0 for no file).
func (m Member) FreeRatio() float64 {
	if m.DBSize <= 0 {
		return 0
	}
	return float64(m.FreeBytes()) / float64(m.DBSize)
}

// Unstarted: added through the API but never started (no name yet).
func (m Member) Unstarted() bool { return m.Name == "" }

// Healthy is the one health rule: a member is healthy when its own client
// URL answered as that member (answeredAs == its ID), it knows a leader,
// and no CORRUPT alarm names it. etcd lists every active alarm in every
// member's status, so only the alarms naming this member count; and a
// NOSPACE alarm stops writes cluster-wide but leaves the member voting and
// serving reads, so it does not make the member unhealthy.
func Healthy(id, answeredAs, leader uint64, alarms []Alarm) bool {
	return answeredAs == id && leader != 0 && !Alarmed(alarms, id, AlarmCorrupt)
}

// Alarmed reports whether alarms hold an alarm of type kind naming id
// (id 0: etcd's alarm for the whole cluster).
func Alarmed(alarms []Alarm, id uint64, kind string) bool {
	for _, a := range alarms {
		if a.MemberID == id && a.Type == kind {
			return true
		}
	}
	return false
}

// Cluster is the live cluster at one instant.
type Cluster struct {
	ClusterID uint64
	LeaderID  uint64 // 0 = no leader known
	Members   []Member
	// Foreign lists the members' endpoints that answered for another
	// cluster ID than the member list's: the cluster cannot be trusted to
	// be the one the spec means.
	Foreign []string
	// Alarms are the cluster's active alarms (AlarmList), each naming a
	// member, which may no longer be in the cluster.
	Alarms []Alarm
	// Now is when it was observed.
	Now time.Time
	// Version is the cluster version (etcd's /version "etcdcluster":
	// "3.6.0"), the minor every member speaks; "" when not read.
	Version string
	// DowngradeTarget is the minor etcd's downgrade is enabled to ("3.6";
	// "": none), as a member's status reports it.
	DowngradeTarget string
	// Recovered is the record of the recovery that made this cluster
	// (read only when this host's data belongs to another cluster).
	Recovered *Recovered
	// Turn is the host turn (nil: nobody holds it, or not read).
	Turn *HostTurn
	// LeaderMoved is the agents' last leader move, while its lease of
	// LeaderMoveQuiet lasts (nil: none, or not read).
	LeaderMoved *LeaderMoved
}

// LeaderMoveQuiet is how long after any leader move the agents made (a
// hand-off before a restart, a defragmentation or a host's turn, an
// operator's `leader move`, the placement's own) the leader placement
// moves nothing: each move costs the cluster's writes a moment, and two
// rules that disagree on the best place must not bounce leadership
// between them.
const LeaderMoveQuiet = 10 * time.Minute

// LeaderMoved is one leader move an agent made, as it recorded it.
type LeaderMoved struct {
	By   string    `json:"by"`
	From uint64    `json:"from"`
	To   uint64    `json:"to"`
	Why  string    `json:"why"`
	At   time.Time `json:"at"`
}

// Text says it for people: "by agent node2 at 10:02:03 UTC: move leader
// from node1 to node3 ...".
func (m LeaderMoved) Text() string {
	if m.By == "" {
		return m.Why
	}
	return fmt.Sprintf("by agent %s at %s: %s", m.By, m.At.UTC().Format("15:04:05 MST"), m.Why)
}

// Recovered is what the source of a recovery from quorum loss records in
// the recovered cluster.
type Recovered struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	// OldClusterID is the cluster that lost its quorum; ClusterID the
	// recovered one (another when restored from a snapshot).
	OldClusterID uint64    `json:"oldClusterID"`
	ClusterID    uint64    `json:"clusterID"`
	At           time.Time `json:"at"`
}

// Member returns the member with id.
func (c Cluster) Member(id uint64) (Member, bool) {
	for _, m := range c.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Listed reports whether the cluster lists member id.
func (c Cluster) Listed(id uint64) bool {
	_, ok := c.Member(id)
	return ok
}

// LeaderOf is the leader that most of the members agree on.
func LeaderOf(ms []Member) uint64 {
	votes := map[uint64]int{}
	var best uint64
	for _, m := range ms {
		if m.Leader == 0 {
			continue
		}
		votes[m.Leader]++
		if votes[m.Leader] > votes[best] {
			best = m.Leader
		}
	}
	return best
}

// Pending remembers since when each learner or unstarted member has been
// pending without progress: the learner timeout counts from the first
// time the agent saw it so, and starts over whenever it makes progress —
// its applied index rises, or its agent reports data arriving (a large
// snapshot takes minutes, and a learner receiving one is not stuck).
type Pending map[uint64]PendingMark

// PendingMark is when a pending member was last seen making progress, and
// the evidence it showed then.
type PendingMark struct {
	Since    time.Time
	Progress string
}

// Stamp sets PendingSince on c's learners and unstarted members and
// forgets members that are no longer pending. progress is what each
// member's agent reports (by member ID; may be nil).
func (p Pending) Stamp(c *Cluster, progress map[uint64]string) {
	seen := map[uint64]bool{}
	for i := range c.Members {
		m := &c.Members[i]
		if !m.IsLearner && !m.Unstarted() {
			continue
		}
		evidence := fmt.Sprintf("applied %d; %s", m.RaftIndex, progress[m.ID])
		if mark, ok := p[m.ID]; !ok || mark.Progress != evidence {
			p[m.ID] = PendingMark{Since: c.Now, Progress: evidence}
		}
		m.PendingSince = p[m.ID].Since
		seen[m.ID] = true
	}
	for id := range p {
		if !seen[id] {
			delete(p, id)
		}
	}
}

// Down remembers since when each started member has been unhealthy.
type Down map[uint64]time.Time

// Stamp sets DownSince on c's unhealthy started members (first seen at
// c.Now) and forgets the members that answer again.
func (d Down) Stamp(c *Cluster) {
	seen := map[uint64]bool{}
	for i := range c.Members {
		m := &c.Members[i]
		if m.Healthy || m.Unstarted() {
			continue
		}
		if _, ok := d[m.ID]; !ok {
			d[m.ID] = c.Now
		}
		m.DownSince = d[m.ID]
		seen[m.ID] = true
	}
	for id := range d {
		if !seen[id] {
			delete(d, id)
		}
	}
}
