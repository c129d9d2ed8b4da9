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
// since when every window has had its WAL fsync p99 at or above
// model.SlowDiskFloor.
type diskMeter struct {
	readings   []diskReading
	aboveSince time.Time
	last       *model.DiskLatency
	lastAt     time.Time
	failed     bool
}

type diskReading struct {
	at          time.Time
	wal, commit model.Histogram
}

// add takes a reading at now and returns the window's latency: its
// percentiles over the readings since the newest one at least a window
// old (the oldest while the meter has seen less than a window).
func (m *diskMeter) add(now time.Time, wal, commit model.Histogram) model.DiskLatency {
	m.readings = append(m.readings, diskReading{now, wal, commit})
	for len(m.readings) > 2 && !m.readings[1].at.After(now.Add(-model.DiskWindow)) {
		m.readings = m.readings[1:]
	}
	base := m.readings[0]
	w, c := wal.Since(base.wal), commit.Since(base.commit)
	if len(m.readings) == 1 {
		// The first reading has nothing to compare with: what etcd saw
		// since it started may be days old.
		w, c = model.Histogram{}, model.Histogram{}
	}
	d := model.DiskLatency{WALFsyncP99: w.Quantile(0.99), CommitP99: c.Quantile(0.99), Fsyncs: int64(w.Count)}
	switch {
	case d.Fsyncs < model.DiskMinFsyncs || d.WALFsyncP99 < model.SlowDiskFloor:
		m.aboveSince = time.Time{}
	case m.aboveSince.IsZero():
		m.aboveSince = now
	}
	if !m.aboveSince.IsZero() {
		d.AboveFor = now.Sub(m.aboveSince)
	}
	return d
}

// reset forgets the readings (another etcd process, a stop).
func (m *diskMeter) reset() {
	m.readings, m.aboveSince, m.last = nil, time.Time{}, nil
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
	d := m.add(m.lastAt, wal, commit)
	m.last = &d
	a.metrics.Disk.SetLocal(d.WALFsyncP99, d.CommitP99, d.Fsyncs >= model.DiskMinFsyncs)
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
				zap.Duration("others-p99", s.Others), zap.Duration("for", s.For), zap.String("reason", s.Text()+": leadership is kept off it"))
		}
	}
	for _, b := range before {
		if !slices.ContainsFunc(v.SlowDisks, func(s model.SlowDisk) bool { return s.ID == b.ID }) {
			a.lg.Info("disk no longer slow", zap.String("member", b.Name))
		}
	}
}
