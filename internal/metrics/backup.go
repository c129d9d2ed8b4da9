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
	RestoreChecks *prometheus.CounterVec // result: ok, failed, ciphertext-only
	Removed       prometheus.Counter

	// Encrypted: the spec in force encrypts new snapshots (1) or not
	// (0); PlaintextUnacknowledged: they are plaintext without the spec
	// saying so (a spec from before encryption).
	Encrypted               prometheus.Gauge
	PlaintextUnacknowledged prometheus.Gauge

	// The restore drill: the newest snapshot downloaded, decrypted,
	// verified and restored offline, timed end to end.
	DrillSeconds     prometheus.Gauge
	DrillStepSeconds *prometheus.GaugeVec // step: download, decrypt, verify, restore
	DrillBytes       prometheus.Gauge
	DrillLastSuccess prometheus.Gauge
	DrillLastFailed  prometheus.Gauge
	DrillFailures    prometheus.Counter
	DrillInterval    prometheus.Gauge
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
			Help: "Restores of the newest snapshot into a throwaway etcd, by result: ok, failed, ciphertext-only (encrypted, no identity on this host: its sha256 checked instead), decrypt-only (its restore does not fit in memory: decrypted in full and compared)."}, []string{"result"}),
		Removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_backup_removed_total", Help: "Snapshots deleted by retention (backup.keep)."}),
		Encrypted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_encrypted",
			Help: "1: new snapshots are encrypted to backup.encryption.recipients; 0: plaintext."}),
		PlaintextUnacknowledged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_backup_plaintext_unacknowledged",
			Help: "1: snapshots are taken in plaintext and the spec does not say so (no recipients, no backup.encryption.plaintext: true)."}),
		DrillSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_seconds",
			Help: "How long the last passed restore drill took end to end: download (S3), decrypt, verify, restore and read back."}),
		DrillStepSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_step_seconds",
			Help: "The steps of the last passed restore drill: download, decrypt, verify, restore; they add up to etcdkeeper_restore_drill_seconds. An encrypted drill from S3 downloads and decrypts in one pass: download is the time it waited on the bucket, decrypt the rest of it."}, []string{"step"}),
		DrillBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_bytes",
			Help: "Size of the snapshot (plaintext) the last passed restore drill restored."}),
		DrillLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_last_success_timestamp_seconds",
			Help: "Unix time of the last passed restore drill (0: none in this run)."}),
		DrillLastFailed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_last_failed",
			Help: "1: the last restore drill failed; 0: it passed, or none ran."}),
		DrillFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdkeeper_restore_drill_failures_total",
			Help: "Failed restore drills."}),
		DrillInterval: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdkeeper_restore_drill_interval_seconds",
			Help: "backup.drillInterval of the spec in force; 0: restore drills are off."}),
	}
	for _, s := range []string{"download", "decrypt", "verify", "restore"} {
		b.DrillStepSeconds.WithLabelValues(s)
	}
	for _, s := range []string{"snapshot", "verify", "upload", "retention", "restore-check"} {
		b.Failures.WithLabelValues(s)
	}
	for _, r := range []string{"ok", "failed", "ciphertext-only", "decrypt-only"} {
		b.RestoreChecks.WithLabelValues(r)
	}
	return b
}

func (b *Backup) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.LastSuccess, b.LastSize, b.LastDuration, b.Interval, b.Failures, b.RestoreChecks, b.Removed,
		b.Encrypted, b.PlaintextUnacknowledged, b.DrillSeconds, b.DrillStepSeconds, b.DrillBytes, b.DrillLastSuccess, b.DrillLastFailed, b.DrillFailures, b.DrillInterval}
}
