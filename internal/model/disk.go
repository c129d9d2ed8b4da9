package model

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// DiskLatency is what an agent publishes of its own member's disk, from
// etcd's own histograms over the last DiskWindow: the 99th percentile of
// its WAL fsyncs (etcd_disk_wal_fsync_duration_seconds: every raft entry
// waits for one, so a leader's slow fsync slows every write the cluster
// takes, and a follower's makes it fall behind) and of its backend
// commits (etcd_disk_backend_commit_duration_seconds), each rounded up to
// a power of two (DiskBucket: the record is rewritten only when one
// moves), and Sustained: every reading of the last SlowDiskFor, each
// over at least DiskReadingFsyncs fsyncs, had a WAL fsync p99 at or above
// SlowDiskFloor (one slow fsync is no slow disk). An agent whose window
// holds fewer than DiskMinFsyncs fsyncs (an idle member) publishes none.
type DiskLatency struct {
	WALFsyncP99 time.Duration `json:"walFsyncP99"`
	CommitP99   time.Duration `json:"commitP99,omitempty"`
	Sustained   bool          `json:"sustained,omitempty"`
}

// The slow-disk rule's numbers. etcd's own guidance is a WAL fsync p99
// under 10 ms; what makes a member worth moving leadership off is being
// far slower than the others, for long enough not to be a moment's
// hiccup (a backup, a log rotation).
const (
	// DiskWindow is the window each agent's percentiles are taken over.
	DiskWindow = 30 * time.Second
	// SlowDiskFloor: below this WAL fsync p99 no disk is slow.
	SlowDiskFloor = 10 * time.Millisecond
	// SlowDiskRatio: a slow disk's p99 is at least this many times the
	// median of the other members' p99.
	SlowDiskRatio = 5
	// SlowDiskFor: every reading for this long must have been slow.
	SlowDiskFor = 15 * time.Second
	// DiskMinFsyncs: a window with fewer fsyncs says nothing (an idle
	// member's p99 is its one slowest fsync); DiskReadingFsyncs: nor does
	// a reading with fewer.
	DiskMinFsyncs     = 50
	DiskReadingFsyncs = 5
)

// DiskBucket rounds a latency up to a power of two of 1/8 ms (0.125,
// 0.25, 0.5, 1, 2, 4 ... ms): etcd's buckets are powers of two, and a
// percentile inside one is an estimate anyway.
func DiskBucket(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	b := 125 * time.Microsecond
	for b < d {
		b *= 2
	}
	return b
}

// SlowDisk is a member whose disk is slow by the rule above.
type SlowDisk struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
	// P99 is its WAL fsync p99; Others the median of the others'.
	P99    time.Duration `json:"p99"`
	Others time.Duration `json:"others"`
}

// Text says it for people: "node2's disk is slow: WAL fsync p99 256ms,
// 64× the others' 4ms".
func (s SlowDisk) Text() string {
	ratio := "far above"
	if s.Others > 0 {
		ratio = fmt.Sprintf("%.0f×", float64(s.P99)/float64(s.Others))
	}
	return fmt.Sprintf("%s's disk is slow: WAL fsync p99 %s, %s the others' %s", s.Name, Latency(s.P99), ratio, Latency(s.Others))
}

// slowDisks applies the rule to the agents' records of the voters in
// members: a member is slow when its agent's measurement is Sustained
// (SlowDiskFloor or more for SlowDiskFor) and its WAL fsync p99 is at
// least SlowDiskRatio times the median of what the other voters' agents
// measured. Without another voter's measurement nobody is slow: a
// cluster whose disks are all slow has no better place for its leader.
// p99 gets each measured member's figure.
func slowDisks(members []Member, recs []AgentRecord, p99 map[uint64]time.Duration) []SlowDisk {
	type measured struct {
		id   uint64
		name string
		d    DiskLatency
	}
	var ms []measured
	for _, r := range recs {
		i := slices.IndexFunc(members, func(m Member) bool { return m.ID == r.MemberID })
		if r.Disk == nil || r.MemberID == 0 || i < 0 || members[i].IsLearner {
			continue
		}
		ms = append(ms, measured{r.MemberID, r.Name, *r.Disk})
	}
	var out []SlowDisk
	for _, m := range ms {
		p99[m.id] = m.d.WALFsyncP99
		if !m.d.Sustained || m.d.WALFsyncP99 < SlowDiskFloor {
			continue
		}
		var others []time.Duration
		for _, o := range ms {
			if o.id != m.id {
				others = append(others, o.d.WALFsyncP99)
			}
		}
		if len(others) == 0 {
			continue
		}
		med := median(others)
		if m.d.WALFsyncP99 >= SlowDiskRatio*med {
			out = append(out, SlowDisk{ID: m.id, Name: m.name, P99: m.d.WALFsyncP99, Others: med})
		}
	}
	slices.SortFunc(out, func(a, b SlowDisk) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// median of ds (the lower middle of an even count: with two others, the
// faster one, so one slow other does not hide a second slow disk).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// SlowDisk is member id's slow disk, if the view found it slow.
func (v View) SlowDisk(id uint64) (SlowDisk, bool) {
	i := slices.IndexFunc(v.SlowDisks, func(s SlowDisk) bool { return s.ID == id })
	if i < 0 {
		return SlowDisk{}, false
	}
	return v.SlowDisks[i], true
}

// DiskP99 is the WAL fsync p99 member id's agent last published (0: none,
// or too few fsyncs to say).
func (v View) DiskP99(id uint64) time.Duration { return v.diskP99[id] }

// Latency rounds a disk latency for people: to the millisecond from
// 10 ms, to a tenth below.
func Latency(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}
