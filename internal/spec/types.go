// Package spec loads and validates the cluster spec: the YAML file, shared by
// every host, that lists the desired etcd members.
package spec

import "time"

// Spec is a loaded, validated and defaulted cluster spec. Every path and
// address in it has {name} already expanded where it is per member (see
// Member); the Etcd and Agent templates keep {name} for reference.
type Spec struct {
	Cluster Cluster  `yaml:"cluster"`
	Members []Member `yaml:"members"`
	Etcd    Etcd     `yaml:"etcd"`
	Agent   Agent    `yaml:"agent"`
	Repair  Repair   `yaml:"repair"`

	// Path is the file the spec was loaded from.
	Path string `yaml:"-"`
	// Generation is a short hex digest of the file's bytes; it changes
	// whenever the content changes.
	Generation string `yaml:"-"`
}

// Cluster names the cluster.
type Cluster struct {
	// Name is required; it is etcd's --initial-cluster-token and the lock
	// prefix /etcdkeeper/<name>/.
	Name string `yaml:"name"`
}

// Member is one desired etcd member. After Load, DataDir, StateDir,
// AgentAddr and the listen URLs are filled in (defaults applied, {name}
// expanded).
type Member struct {
	Name       string   `yaml:"name"`
	PeerURLs   []string `yaml:"peerURLs"`
	ClientURLs []string `yaml:"clientURLs"`
	// ListenPeerURLs / ListenClientURLs: optional; must use IP hosts. When
	// empty they are derived from the advertised URLs: an IP host listens on
	// that IP, "localhost" on 127.0.0.1, any other DNS name on 0.0.0.0 with
	// the same scheme and port.
	ListenPeerURLs   []string `yaml:"listenPeerURLs"`
	ListenClientURLs []string `yaml:"listenClientURLs"`
	DataDir          string   `yaml:"dataDir"`
	AgentAddr        string   `yaml:"agentAddr"`

	// StateDir is agent.stateDir with {name} expanded (not a YAML field).
	StateDir string `yaml:"-"`
	// BackupDir is agent.backupDir with {name} expanded, or, when that is
	// empty, DataDir + ".backups" (not a YAML field).
	BackupDir string `yaml:"-"`
	// Line is the line of the member's entry in the spec file.
	Line int `yaml:"-"`
}

// Etcd configures the etcd server every member runs.
type Etcd struct {
	// Binary is an external etcd binary; empty means the etcd built into
	// etcdkeeper ("etcdkeeper etcd ...").
	Binary string `yaml:"binary"`
	// DataDir is the data dir template; {name} is the member's name.
	DataDir string `yaml:"dataDir"`
	// Flags are extra etcd flags: name without dashes -> value.
	Flags map[string]string `yaml:"flags"`
}

// Agent configures etcdkeeper itself.
type Agent struct {
	Addr      string `yaml:"addr"`
	StateDir  string `yaml:"stateDir"`
	BackupDir string `yaml:"backupDir"`
	// Interval is the period of the reconcile loop when nothing triggers it.
	Interval Duration `yaml:"interval"`
	// LearnerTimeout: a learner or unstarted member that stays
	// un-promotable this long is removed.
	LearnerTimeout Duration `yaml:"learnerTimeout"`
	// StopTimeout: how long etcd gets after SIGTERM before SIGKILL.
	StopTimeout Duration `yaml:"stopTimeout"`
}

// Repair configures self-repair of a member with corrupt data.
type Repair struct {
	// Enabled: false makes the agent only report corruption.
	Enabled *bool `yaml:"enabled"`
	// MaxPerHour bounds repairs of this member in any rolling hour.
	MaxPerHour int `yaml:"maxPerHour"`
	// KeepBackups is how many moved-aside data dirs are kept (newest first).
	KeepBackups int `yaml:"keepBackups"`
	// MinFreeMB is the free space (MiB) that must remain after the
	// snapshot and the move.
	MinFreeMB int64 `yaml:"minFreeMB"`
}

// Duration is a time.Duration written as "2s", "2m" in YAML.
type Duration struct{ time.Duration }
