package model

import (
	"fmt"
	"time"
)

// MinCatchUpEntries is the least lag, in raft entries, that CatchUpBound
// allows: two status answers taken a few milliseconds apart under heavy
// write load differ by hundreds of entries on members that keep up.
const MinCatchUpEntries = 1000

// CatchUpBound is how far a voter's committed index may trail the
// leader's for it to count as caught up, given etcd's
// snapshot-catchup-entries (0: etcd's default, 5000). The leader keeps
// that many entries in its raft log after each snapshot for slow
// followers; one further behind gets the whole db sent instead, which
// takes minutes on a large one. Half of it leaves a member we count well
// inside what the leader can replay from its log; MinCatchUpEntries keeps
// a small setting from making members that keep up look behind.
func CatchUpBound(snapshotCatchupEntries uint64) uint64 {
	if snapshotCatchupEntries == 0 {
		snapshotCatchupEntries = 5000
	}
	return max(MinCatchUpEntries, snapshotCatchupEntries/2)
}

// RiseWindow is how recent the previous observation of a member must be
// for a rise of its index since then to say it is moving now.
const RiseWindow = 30 * time.Second

// CaughtUp is the rule for voluntary stops and removals (Healthy is the
// rule for "it answers"): a voter counts toward the quorum that is left
// only when it is healthy, its committed index is within bound of the
// leader's, and the index is either level with the leader's (an idle
// cluster's indexes do not move) or rose since the previous observation.
// A member that answers with a leader may still be catching up (it was cut
// off, or it is receiving a snapshot), or be stuck on its disk: etcd's
// Status answers from memory, so a member whose WAL fsync hangs keeps
// answering with its last leader and a frozen index. Counting either
// would make a stop or removal wait on it for writes to commit.
// It says why not, naming the member, when the member is healthy but not
// caught up.
func CaughtUp(m Member, bound uint64) (bool, string) {
	if !m.Healthy || m.Unstarted() {
		return false, ""
	}
	name := m.Name
	switch {
	case m.Behind > bound:
		return false, fmt.Sprintf("%s is catching up (index %d behind the leader)", name, m.Behind)
	case m.Behind == 0 || m.Rising:
		return true, ""
	case m.IndexSince.IsZero():
		return false, fmt.Sprintf("%s is catching up (index %d behind the leader, not yet seen rising)", name, m.Behind)
	}
	return false, fmt.Sprintf("%s is not catching up (index %d behind the leader, unchanged since %s: a stuck disk?)",
		name, m.Behind, m.IndexSince.UTC().Format(time.TimeOnly))
}

// Progress remembers each member's committed index at the previous
// observation, and since when it has had that value, so that one
// observation can tell a member that is catching up from one that is
// stuck. Like Pending, it is kept by whoever observes repeatedly.
type Progress map[uint64]IndexMark

// IndexMark is a member's committed index when last observed, when it
// was observed, and since when it has had that value.
type IndexMark struct {
	Index uint64
	Seen  time.Time
	Since time.Time
}

// Stamp sets Behind, Rising, IndexSince, CaughtUp and Lag on c's members
// (against the leader's committed index; bound as CatchUpBound), and
// forgets the members that are gone. Members without a status answer are
// not marked: they are not healthy anyway.
func (p Progress) Stamp(c *Cluster, bound uint64) {
	lead := c.leaderIndex()
	seen := map[uint64]bool{}
	for i := range c.Members {
		m := &c.Members[i]
		if m.Err != "" || m.Leader == 0 {
			continue
		}
		seen[m.ID] = true
		if lead > m.RaftIndex {
			m.Behind = lead - m.RaftIndex
		}
		prev, ok := p[m.ID]
		m.Rising = ok && m.RaftIndex > prev.Index && c.Now.Sub(prev.Seen) <= RiseWindow
		since := c.Now
		if ok && m.RaftIndex == prev.Index {
			since = prev.Since
		}
		p[m.ID] = IndexMark{Index: m.RaftIndex, Seen: c.Now, Since: since}
		if ok {
			m.IndexSince = since
		}
		m.CaughtUp, m.Lag = CaughtUp(*m, bound)
	}
	for id := range p {
		if !seen[id] {
			delete(p, id)
		}
	}
}

// leaderIndex is the leader's committed index when the leader answered,
// else the highest any member reported (no member can be ahead of a
// leader that commits).
func (c *Cluster) leaderIndex() uint64 {
	if l, ok := c.Member(c.LeaderID); ok && l.Err == "" && l.Leader != 0 {
		return l.RaftIndex
	}
	var top uint64
	for _, m := range c.Members {
		if m.Err == "" {
			top = max(top, m.RaftIndex)
		}
	}
	return top
}
