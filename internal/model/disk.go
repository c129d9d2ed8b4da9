package model

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// DiskLatency is what an agent measured of its own member's disk, from
// etcd's own histograms over the last DiskWindow: the 99th percentile of
// its WAL fsyncs (etcd_disk_wal_fsync_duration_seconds: every raft entry
// waits for one, so a slow one slows every write the member takes part
// in, and every write the cluster takes while it leads) and of its
// backend commits (etcd_disk_backend_commit_duration_seconds), how many
// fsyncs they rest on, and how long the agent has seen the fsync p99 at
// or above SlowDiskFloor in every window since (by its own clock).
type DiskLatency struct {
	WALFsyncP99 time.Duration `json:"walFsyncP99"`
	CommitP99   time.Duration `json:"commitP99,omitempty"`
	Fsyncs      int64         `json:"fsyncs"`
	AboveFor    time.Duration `json:"aboveFor,omitempty"`
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
	// SlowDiskFor: the p99 must have stayed at or above SlowDiskFloor for
	// this long.
	SlowDiskFor = 15 * time.Second
	// DiskMinFsyncs: a window with fewer fsyncs says nothing (an idle
	// member's p99 is a guess).
	DiskMinFsyncs = 10
)

// SlowDisk is a member whose disk is slow by the rule above.
type SlowDisk struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
	// P99 is its WAL fsync p99; Others the median of the others'.
	P99    time.Duration `json:"p99"`
	Others time.Duration `json:"others"`
	For    time.Duration `json:"for"`
}

// Text says it for people: "node2's disk is slow: WAL fsync p99 210ms,
// 42× the others' 5ms, for 35s".
func (s SlowDisk) Text() string {
	ratio := "far above"
	if s.Others > 0 {
		ratio = fmt.Sprintf("%.0f×", float64(s.P99)/float64(s.Others))
	}
	return fmt.Sprintf("%s's disk is slow: WAL fsync p99 %s, %s the others' %s, for %s",
		s.Name, Latency(s.P99), ratio, Latency(s.Others), s.For.Round(time.Second))
}

// slowDisks applies the rule to the agents' records of the voters in
// members: a member is slow when its agent measured a WAL fsync p99 of at
// least SlowDiskFloor for SlowDiskFor, over enough fsyncs, at least
// SlowDiskRatio times the median of what the other voters' agents
// measured. Without another voter's measurement nobody is slow: a
// cluster whose disks are all slow has no better place for its leader.
func slowDisks(members []Member, recs []AgentRecord, p99 map[uint64]time.Duration) []SlowDisk {
	type measured struct {
		id   uint64
		name string
		d    DiskLatency
	}
	var ms []measured
	for _, r := range recs {
		i := slices.IndexFunc(members, func(m Member) bool { return m.ID == r.MemberID })
		if r.Disk == nil || r.MemberID == 0 || i < 0 || members[i].IsLearner || r.Disk.Fsyncs < DiskMinFsyncs {
			continue
		}
		ms = append(ms, measured{r.MemberID, r.Name, *r.Disk})
	}
	var out []SlowDisk
	for _, m := range ms {
		p99[m.id] = m.d.WALFsyncP99
		if m.d.WALFsyncP99 < SlowDiskFloor || m.d.AboveFor < SlowDiskFor {
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
			out = append(out, SlowDisk{ID: m.id, Name: m.name, P99: m.d.WALFsyncP99, Others: med, For: m.d.AboveFor})
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
