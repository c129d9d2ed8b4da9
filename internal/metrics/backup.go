package metrics

import "github.com/prometheus/client_golang/prometheus"

// Backup are the scheduled snapshots' metrics (package backup).
type Backup struct {
	// LastSuccess is the time of the newest verified snapshot in the
	// backup dir (read from disk at start); before there is one, the
	// time the schedule started, so that "older than twice the interval"
	// also fires when none was ever taken.
	LastSuccess   prometheus.Gauge
	LastSize      prometheus.Gauge
	LastDuration  prometheus.Gauge
	Interval      prometheus.Gauge
	Failures      *prometheus.CounterVec // stage: snapshot, verify, upload, retention, restore-check
	RestoreChecks *prometheus.CounterVec // result: ok, failed
	Removed       prometheus.Counter
}

func newBackup() *Backup {
	b := &Backup{
		LastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_last_success_timestamp_seconds",
			Help: "Unix time of the newest verified snapshot in the backup dir (before the first: when the schedule started)."}),
		LastSize:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_last_size_bytes", Help: "Size of the newest verified snapshot."}),
		LastDuration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_last_duration_seconds", Help: "How long taking and verifying the newest snapshot took."}),
		Interval:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_interval_seconds", Help: "backup.interval of the spec in force; 0: scheduled snapshots are off."}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_backup_failures_total",
			Help: "Failed scheduled snapshot steps, by stage: snapshot, verify, upload, retention, restore-check."}, []string{"stage"}),
		RestoreChecks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdkeeper_backup_restore_checks_total",
			Help: "Restores of the newest snapshot into a throwaway etcd, by result: ok, failed."}, []string{"result"}),
		Removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_backup_removed_total", Help: "Snapshots deleted by retention (backup.keep)."}),
	}
	for _, s := range []string{"snapshot", "verify", "upload", "retention", "restore-check"} {
		b.Failures.WithLabelValues(s)
	}
	for _, r := range []string{"ok", "failed"} {
		b.RestoreChecks.WithLabelValues(r)
	}
	return b
}

func (b *Backup) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.LastSuccess, b.LastSize, b.LastDuration, b.Interval, b.Failures, b.RestoreChecks, b.Removed}
}
