package metrics

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Disk is what this agent measured of its member's disk, and what it
// sees of every member's (the slow-disk verdict of model.View), and the
// leader moves it made for the leader placement.
type Disk struct {
	WALFsyncP99   prometheus.Gauge
	CommitP99     prometheus.Gauge
	Slow          *prometheus.GaugeVec   // member
	LeaderPlacing *prometheus.CounterVec // reason: slow-disk, avoid, prefer
}

func newDisk() *Disk {
	d := &Disk{
		WALFsyncP99: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_disk_wal_fsync_p99_seconds",
			Help: "99th percentile of the local etcd's WAL fsyncs over the last 30 s (etcd_disk_wal_fsync_duration_seconds), as this agent measured it; NaN while too few fsyncs say anything."}),
		CommitP99: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_disk_backend_commit_p99_seconds",
			Help: "99th percentile of the local etcd's backend commits over the last 30 s (etcd_disk_backend_commit_duration_seconds), as this agent measured it."}),
		Slow: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_member_disk_slow",
			Help: "1 while the member's WAL fsync p99 has been at least 10 ms and 5 times the other members' median for 15 s (its agent's measurement): leadership is moved off it; every member as this agent last saw the records."}, []string{"member"}),
		LeaderPlacing: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_leader_placement_moves_total",
			Help: "Leader moves this agent made to keep leadership off a slow disk or to honour the spec's leader tags, by reason: slow-disk, avoid, prefer."}, []string{"reason"}),
	}
	for _, r := range []string{"slow-disk", "avoid", "prefer"} {
		d.LeaderPlacing.WithLabelValues(r)
	}
	return d
}

func (d *Disk) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.WALFsyncP99, d.CommitP99, d.Slow, d.LeaderPlacing}
}

// SetLocal sets this agent's measurement; measured false: nothing to say.
func (d *Disk) SetLocal(wal, commit time.Duration, measured bool) {
	if !measured {
		d.WALFsyncP99.Set(math.NaN())
		d.CommitP99.Set(math.NaN())
		return
	}
	d.WALFsyncP99.Set(wal.Seconds())
	d.CommitP99.Set(commit.Seconds())
}

// SetSlow replaces the verdicts: slow by member name, for every member
// named.
func (d *Disk) SetSlow(members []string, slow map[string]bool) {
	d.Slow.Reset()
	for _, m := range members {
		v := 0.0
		if slow[m] {
			v = 1
		}
		d.Slow.WithLabelValues(m).Set(v)
	}
}
