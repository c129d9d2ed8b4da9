package spec

import (
	"path/filepath"
	"strings"
	"time"
)

// Defaults for everything the spec may leave out.
const (
	defaultDataDir     = "/var/lib/etcd/{name}"
	defaultAgentAddr   = "127.0.0.1:2378"
	defaultStateDir    = "/var/lib/etcdkeeper/{name}"
	defaultInterval    = 2 * time.Second
	defaultLearnerTime = 2 * time.Minute
	defaultStopTimeout = 10 * time.Second
	defaultMaxPerHour  = 3
	defaultKeepBackups = 5
	defaultMinFreeMB   = 256
	defaultBackupEvery = time.Hour
	defaultBackupKeep  = 24
	// defaultDrillEvery: one restore drill a day, as the restore check.
	defaultDrillEvery = 24 * time.Hour
	// SnapshotSubdir names the snapshot dir inside the state dir when
	// backup.dir is empty.
	SnapshotSubdir = "backups"
	// BackupSubdir names the backup dir inside the data dir when
	// agent.backupDir is empty. Repair moves <dataDir>/member into it: a
	// rename on the data dir's own filesystem, never a copy, that works
	// even when the data dir is a mount point or the root of a systemd
	// StateDirectory= (etcd only warns about the extra folder).
	BackupSubdir = ".etcdkeeper-backups"
)

// applyDefaults fills what the file left out, resolves relative paths
// against base and fills each member's derived fields.
func (d *doc) applyDefaults(s *Spec, base string) {
	s.Etcd.DataDir = resolvePath(base, orDefault(s.Etcd.DataDir, defaultDataDir))
	s.Agent.Addr = orDefault(s.Agent.Addr, defaultAgentAddr)
	s.Agent.StateDir = resolvePath(base, orDefault(s.Agent.StateDir, defaultStateDir))
	s.Agent.BackupDir = resolvePath(base, s.Agent.BackupDir)
	if s.Etcd.Flags == nil {
		s.Etcd.Flags = map[string]string{}
	}
	d.defaultDuration("agent.interval", &s.Agent.Interval, defaultInterval)
	d.defaultDuration("agent.learnerTimeout", &s.Agent.LearnerTimeout, defaultLearnerTime)
	d.defaultDuration("agent.stopTimeout", &s.Agent.StopTimeout, defaultStopTimeout)
	d.defaultRepair(&s.Repair)
	resolveTLS(base, &s.TLS)
	s.Auth.CredentialsFile = resolvePath(base, s.Auth.CredentialsFile)
	d.defaultBackup(&s.Backup, base)
	d.defaultSnapshotMaxAge(&s.Repair, s.Backup)
	d.defaultMaintenance(&s.Maintenance)
	for i := range s.Members {
		fillMember(s, &s.Members[i], base)
	}
}

func (d *doc) defaultDuration(path string, v *Duration, def time.Duration) {
	if !d.given[path] {
		v.Duration = def
	}
}

func (d *doc) defaultRepair(r *Repair) {
	if r.Snapshot == nil {
		on := true
		r.Snapshot = &on
	}
	if r.Enabled == nil {
		on := true
		r.Enabled = &on
	}
	if !d.given["repair.maxPerHour"] {
		r.MaxPerHour = defaultMaxPerHour
	}
	if !d.given["repair.keepBackups"] {
		r.KeepBackups = defaultKeepBackups
	}
	if !d.given["repair.minFreeMB"] {
		r.MinFreeMB = defaultMinFreeMB
	}
}

func (d *doc) defaultBackup(b *Backup, base string) {
	b.Dir = resolvePath(base, b.Dir)
	d.defaultDuration("backup.interval", &b.Interval, defaultBackupEvery)
	if !d.given["backup.keep"] {
		b.Keep = defaultBackupKeep
	}
	b.S3.CredentialsFile = resolvePath(base, b.S3.CredentialsFile)
	b.S3.CAFile = resolvePath(base, b.S3.CAFile)
	b.Encryption.IdentityFile = resolvePath(base, b.Encryption.IdentityFile)
	b.Encryption.RecipientsFile = resolvePath(base, b.Encryption.RecipientsFile)
	d.defaultDuration("backup.drillInterval", &b.DrillInterval, defaultDrillEvery)
}

// snapshotReuseIntervals is repair.snapshotMaxAge's default in
// backup.intervals: a repair reuses a verified scheduled snapshot up to two
// intervals old. Scheduled snapshots are on by default, and a fresh
// safety snapshot streams the whole db from the leader before the repair
// can start (about a second per 100 MB, 15-20 s at 1 GB on the bench), a
// cost that grows with the db the defaults must serve (1-8 GB). One
// interval would miss every repair that falls just before the next
// snapshot is taken or verified (taking and checking one of 1 GB takes
// tens of seconds) or after one failed take; two cover both, and the
// snapshot a repair reuses then holds no more than the history a restore
// from the schedule would lose anyway. The repair does not depend on it:
// it rejoins from the leader's current data either way.
const snapshotReuseIntervals = 2

// defaultSnapshotMaxAge: unless the spec sets repair.snapshotMaxAge
// (0s takes a fresh safety snapshot for every repair), reuse is on
// whenever scheduled snapshots are.
func (d *doc) defaultSnapshotMaxAge(r *Repair, b Backup) {
	if !d.given["repair.snapshotMaxAge"] && b.Interval.Duration > 0 {
		r.SnapshotMaxAge.Duration = snapshotReuseIntervals * b.Interval.Duration
	}
}

func fillMember(s *Spec, m *Member, base string) {
	m.DataDir = expand(resolvePath(base, orDefault(m.DataDir, s.Etcd.DataDir)), m.Name)
	m.StateDir = expand(s.Agent.StateDir, m.Name)
	m.BackupDir = expand(s.Agent.BackupDir, m.Name)
	if m.BackupDir == "" {
		m.BackupDir = filepath.Join(m.DataDir, BackupSubdir)
	}
	m.SnapshotDir = expand(s.Backup.Dir, m.Name)
	if m.SnapshotDir == "" {
		m.SnapshotDir = filepath.Join(m.StateDir, SnapshotSubdir)
	}
	m.AgentAddr = expand(orDefault(m.AgentAddr, s.Agent.Addr), m.Name)
	m.TLS = expandTLS(s.TLS, m.Name)
	if m.Flags == nil {
		m.Flags = map[string]string{}
	}
	if len(m.ListenPeerURLs) == 0 {
		m.ListenPeerURLs = listenURLs(m.PeerURLs)
	}
	if len(m.ListenClientURLs) == 0 {
		m.ListenClientURLs = listenURLs(m.ClientURLs)
	}
}

// resolvePath makes p absolute against the spec file's directory and
// cleans it.
func resolvePath(base, p string) string {
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

func expand(template, name string) string {
	return strings.ReplaceAll(template, "{name}", name)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
