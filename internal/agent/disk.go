package agent

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// diskEvery is how often the agent reads its etcd's disk histograms: a
// pass at most every diskEvery looks (a steady pass comes every 5 s).
const diskEvery = 5 * time.Second

// diskMeter turns the cumulative histograms etcd exports into what the
// last model.DiskWindow saw: it keeps the readings of the window, and
// since when every reading (the histograms' change since the one before)
// has had its WAL fsync p99 at or above model.SlowDiskFloor.
type diskMeter struct {
	readings   []diskReading
	aboveSince time.Time
	lastAt     time.Time
	failed     bool
	// last is the latest measurement (nil: none), published the part of
	// it the agent's record carries (nil: too few fsyncs to say).
	last      *DiskMeasure
	published *model.DiskLatency
}

type diskReading struct {
	at          time.Time
	wal, commit model.Histogram
}

// DiskMeasure is what the agent measured of its member's disk over the
// last model.DiskWindow, as /status shows it: the percentiles, how many
// fsyncs they rest on, and how long every reading has been slow.
type DiskMeasure struct {
	WALFsyncP99 time.Duration `json:"walFsyncP99"`
	CommitP99   time.Duration `json:"commitP99"`
	Fsyncs      int64         `json:"fsyncs"`
	AboveFor    time.Duration `json:"aboveFor,omitempty"`
}

// diskGap: readings further apart than this (a pass that took long, etcd
// down) start the window and the hold over.
const diskGap = 3 * diskEvery

// add takes a reading at now and returns the window's measurement: its
// percentiles over the readings since the newest one at least a window
// old (the oldest while the meter has seen less than a window), and what
// the agent's record publishes of it.
func (m *diskMeter) add(now time.Time, wal, commit model.Histogram) (DiskMeasure, *model.DiskLatency) {
	if n := len(m.readings); n > 0 && now.Sub(m.readings[n-1].at) > diskGap {
		m.reset()
	}
	m.readings = append(m.readings, diskReading{now, wal, commit})
	for len(m.readings) > 2 && !m.readings[1].at.After(now.Add(-model.DiskWindow)) {
		m.readings = m.readings[1:]
	}
	n := len(m.readings)
	if n == 1 {
		// The first reading has nothing to compare with: what etcd saw
		// since it started may be days old.
		m.aboveSince = time.Time{}
		return DiskMeasure{}, nil
	}
	prev := m.readings[n-2]
	step := wal.Since(prev.wal)
	switch {
	case step.Count < model.DiskReadingFsyncs || step.Quantile(0.99) < model.SlowDiskFloor:
		m.aboveSince = time.Time{}
	case m.aboveSince.IsZero():
		m.aboveSince = prev.at
	}
	w, c := wal.Since(m.readings[0].wal), commit.Since(m.readings[0].commit)
	d := DiskMeasure{WALFsyncP99: w.Quantile(0.99), CommitP99: c.Quantile(0.99), Fsyncs: int64(w.Count)}
	if !m.aboveSince.IsZero() {
		d.AboveFor = now.Sub(m.aboveSince)
	}
	if d.Fsyncs < model.DiskMinFsyncs {
		return d, nil
	}
	return d, &model.DiskLatency{WALFsyncP99: model.DiskBucket(d.WALFsyncP99), CommitP99: model.DiskBucket(d.CommitP99),
		Sustained: d.WALFsyncP99 >= model.SlowDiskFloor && d.AboveFor >= model.SlowDiskFor}
}

// reset forgets the readings (another etcd process, a stop, a gap).
func (m *diskMeter) reset() {
	m.readings, m.aboveSince, m.last, m.published = nil, time.Time{}, nil, nil
}

// measureDisk reads the local etcd's disk histograms, at most every
// diskEvery, into the measurement the agent's record publishes.
func (a *Agent) measureDisk(ctx context.Context, endpoint string) {
	m := &a.disk
	if time.Since(m.lastAt) < diskEvery {
		return
	}
	m.lastAt = time.Now()
	wal, commit, err := a.client.DiskHistograms(ctx, endpoint)
	if err != nil {
		if !m.failed {
			a.lg.Warn("cannot read etcd's disk latency; the slow-disk rule does without this member", zap.Error(err))
		}
		m.failed = true
		m.reset()
		a.metrics.Disk.SetLocal(0, 0, false)
		return
	}
	if m.failed {
		a.lg.Info("etcd's disk latency read again")
		m.failed = false
	}
	d, pub := m.add(m.lastAt, wal, commit)
	m.last, m.published = &d, pub
	a.metrics.Disk.SetLocal(d.WALFsyncP99, d.CommitP99, pub != nil)
}

// noteDisks records what the view says of the members' disks: the
// metric, the status, and a line when a member's verdict changes.
func (a *Agent) noteDisks(v model.View) {
	var names []string
	slow := map[string]bool{}
	for _, m := range v.Members() {
		if m.Name != "" {
			names = append(names, m.Name)
		}
	}
	for _, s := range v.SlowDisks {
		slow[s.Name] = true
	}
	a.metrics.Disk.SetSlow(names, slow)
	var before []model.SlowDisk
	a.updateStatus(func(st *Status) {
		before, st.SlowDisks = st.SlowDisks, slices.Clone(v.SlowDisks)
		st.Disk = a.disk.last
	})
	for _, s := range v.SlowDisks {
		if !slices.ContainsFunc(before, func(b model.SlowDisk) bool { return b.ID == s.ID }) {
			a.lg.Warn("slow disk", zap.String("member", s.Name), zap.Duration("wal-fsync-p99", s.P99),
				zap.Duration("others-p99", s.Others), zap.String("reason", s.Text()+": leadership is kept off it"))
		}
	}
	for _, b := range before {
		if !slices.ContainsFunc(v.SlowDisks, func(s model.SlowDisk) bool { return s.ID == b.ID }) {
			a.lg.Info("disk no longer slow", zap.String("member", b.Name))
		}
	}
}
