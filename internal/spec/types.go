// Package spec loads and validates the cluster spec: the YAML file, shared by
// every host, that lists the desired etcd members.
package spec

import "time"

// Spec is a loaded, validated and defaulted cluster spec. Every path and
// address in it has {name} already expanded where it is per member (see
// Member); the Etcd and Agent templates keep {name} for reference.
//
// The yaml tags name the spec file's keys, for the decoder (decode.go
// builds its key tables from them) and for yaml.Marshal alike.
type Spec struct {
	Cluster Cluster  `yaml:"cluster"`
	Members []Member `yaml:"members"`
	Etcd    Etcd     `yaml:"etcd"`
	Agent   Agent    `yaml:"agent"`
	Repair  Repair   `yaml:"repair"`
	TLS     TLS      `yaml:"tls"`
	Auth    Auth     `yaml:"auth"`
	Backup  Backup   `yaml:"backup"`
	// Maintenance: defragmentation (see maintenance.go).
	Maintenance Maintenance `yaml:"maintenance"`

	// Path is the file the spec was loaded from.
	Path string `yaml:"-"`
	// Generation is a short hex digest of the file's bytes; it changes
	// whenever the content changes.
	Generation string `yaml:"-"`
	// Warnings are what is not wrong yet but needs the operator, such as a
	// certificate that expires within 30 days; validate prints them.
	Warnings Errors `yaml:"-"`
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
	// Flags are this member's own etcd flags, over etcd.flags: for a
	// setting that differs between hosts, such as --listen-metrics-urls on
	// each host's own address. The same rules as etcd.flags apply.
	Flags map[string]string `yaml:"flags"`
	// Leader is where this member stands for leadership: "prefer" (the
	// agents move leadership to it when it is a caught-up voter with a
	// healthy disk), "avoid" (moved off it whenever another can take
	// over), or "" (no preference). etcd has no leader priority: the
	// agents honour it with leader moves, at most one in
	// model.LeaderMoveQuiet of any leader move (TiKV PD's leader priority is the model).
	Leader string `yaml:"leader"`

	// StateDir is agent.stateDir with {name} expanded (not a YAML field).
	StateDir string `yaml:"-"`
	// BackupDir is agent.backupDir with {name} expanded, or, when that is
	// empty, DataDir/.etcdkeeper-backups (not a YAML field).
	BackupDir string `yaml:"-"`
	// SnapshotDir is backup.dir with {name} expanded, or, when that is
	// empty, StateDir/backups: where this member's agent keeps its
	// scheduled snapshots (not a YAML field).
	SnapshotDir string `yaml:"-"`
	// TLS is the spec's tls: with {name} expanded for this member: the
	// files this member's etcd and agent use (not a YAML field).
	TLS TLS `yaml:"-"`
	// Line is the line of the member's entry in the spec file.
	Line int `yaml:"-"`
}

// Etcd configures the etcd server every member runs.
type Etcd struct {
	// Binary is an external etcd binary; empty means the etcd built into
	// etcdkeeper ("etcdkeeper etcd ...").
	Binary string `yaml:"binary"`
	// SHA256 is the hex sha256 of Binary's file: checked by validate and
	// by the agent before every start of etcd (a mismatch starts nothing).
	SHA256 string `yaml:"sha256"`
	// DataDir is the data dir template; {name} is the member's name.
	DataDir string `yaml:"dataDir"`
	// Flags are extra etcd flags: name without dashes -> value.
	Flags map[string]string `yaml:"flags"`
	// Line is the line of etcd.binary in the spec file (of etcd: when it
	// is not written; 0: neither).
	Line int `yaml:"-"`
}

// Agent configures etcdkeeper itself.
type Agent struct {
	Addr string `yaml:"addr"`
	// RecoveryAddr, when set, is a second listener (host:port; an empty
	// host binds every address) that serves only the recovery endpoint
	// (GET/POST /recovery) to the other hosts, so that
	// `etcdkeeper recover` reaches every agent while etcd cannot carry
	// the coordination. It is mutual TLS with tls.peer: the member's
	// peer certificate, and callers must present one the peer CA signed
	// that names a member of the spec. Without tls.peer the spec is not
	// valid unless RecoveryInsecure says so.
	// Empty (the default): /recovery is served on addr (reads) and on
	// the control socket in stateDir (changes, from this host only).
	RecoveryAddr string `yaml:"recoveryAddr"`
	// RecoveryInsecure: serve recoveryAddr as plain HTTP without tls.peer:
	// anyone who reaches it can fence members or force a new cluster. Only
	// on a network that nobody but the members reaches.
	RecoveryInsecure bool   `yaml:"recoveryInsecure"`
	StateDir         string `yaml:"stateDir"`
	BackupDir        string `yaml:"backupDir"`
	// Interval is the period of the reconcile loop when nothing triggers it;
	// while the member and every other are healthy voters and the cluster
	// matches the spec, the loop looks every 5 s at least.
	Interval Duration `yaml:"interval"`
	// LearnerTimeout: a learner or unstarted member that stays
	// un-promotable this long is removed.
	LearnerTimeout Duration `yaml:"learnerTimeout"`
	// StopTimeout: how long etcd gets after SIGTERM before SIGKILL.
	StopTimeout Duration `yaml:"stopTimeout"`
	// RestartPublishStall: restart a joining learner's etcd that lost
	// etcd's publish race (docs/etcd-publish-stall.md) instead of waiting
	// out its 7 s publish timeout. nil means true.
	RestartPublishStall *bool `yaml:"restartPublishStall"`
}

// Repair configures self-repair of a member with corrupt data.
type Repair struct {
	// Enabled: false makes the agent only report corruption.
	Enabled *bool `yaml:"enabled"`
	// Snapshot: before a repair changes anything, save a snapshot of the
	// keyspace from the leader into agent.stateDir/snapshots (kept). On by
	// default; it costs about a second per 100 MB of db.
	Snapshot *bool `yaml:"snapshot"`
	// MaxPerHour bounds repairs of this member in any rolling hour.
	MaxPerHour int `yaml:"maxPerHour"`
	// KeepBackups is how many moved-aside data dirs are kept (newest first).
	KeepBackups int `yaml:"keepBackups"`
	// MinFreeMB is the free space (MiB) that must remain after the
	// snapshot and the move.
	MinFreeMB int64 `yaml:"minFreeMB"`
	// SnapshotMaxAge: a verified scheduled snapshot (backup:) at most this
	// old stands for the repair's safety snapshot, so the repair need not
	// transfer the keyspace first. 0: always a fresh one. Default: twice
	// backup.interval when scheduled snapshots are on, else 0.
	SnapshotMaxAge Duration `yaml:"snapshotMaxAge"`
}

// Duration is a time.Duration written as "2s", "2m" in YAML.
type Duration struct{ time.Duration }

// TLS configures certificates for etcd's client and peer ports and for the
// agent's own connections to etcd. Paths may contain {name}; relative
// paths are relative to the spec file. An empty section means plain http.
type TLS struct {
	// Client: etcd's client port (--cert-file, --key-file,
	// --trusted-ca-file, --client-cert-auth). clientURLs must be https.
	Client TLSServer `yaml:"client"`
	// Peer: etcd's peer port (--peer-cert-file, --peer-key-file,
	// --peer-trusted-ca-file, --peer-client-cert-auth). peerURLs must be
	// https.
	Peer TLSServer `yaml:"peer"`
	// Agent: the certificate the agent (and etcdkeeper status/plan)
	// presents to etcd's client port, and the CA it trusts.
	Agent TLSClient `yaml:"agent"`
	// CA is the CA that issues the certificates above. On a host that has
	// its key, the agent renews them before they expire (and those in
	// Renew.Others); see docs/certificates.md.
	CA TLSCA `yaml:"ca"`
	// Renew: when the agents renew, and which other certificates of the
	// host's they keep renewed.
	Renew TLSRenew `yaml:"renew"`
}

// TLSCA is a CA certificate and its private key (optional: a host
// without it renews nothing), and the CA to rotate to.
type TLSCA struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// Next, when set, starts a CA rotation to it (docs/certificates.md).
	Next TLSNextCA `yaml:"next"`
}

// TLSNextCA is the CA a rotation moves to: every member first trusts both,
// then is issued new certificates by it, then trusts only it.
type TLSNextCA struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// WaitForClients holds the rotation once every member trusts both
	// CAs, until `etcdkeeper certs rotate-ca --clients-ready`: for clients
	// that read etcd's CA only when they start (kube-apiserver), to be
	// restarted first.
	WaitForClients bool `yaml:"waitForClients"`
}

// TLSRenew says when a certificate is renewed and which other ones, beside
// the member's own, the agent renews.
type TLSRenew struct {
	// Before is how long before its expiry a certificate is renewed
	// (0: a third of its lifetime or 30 days before, whichever comes
	// first, and never earlier than half its lifetime).
	Before Duration `yaml:"before"`
	// Others are certificates of other programs on the host that tls.ca
	// issued (kubeadm's apiserver-etcd-client, healthcheck-client).
	Others []TLSOther `yaml:"others"`
}

// TLSOther is one other certificate the agent keeps renewed.
type TLSOther struct {
	Name     string `yaml:"name"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// TLSServer is one of etcd's listening sides.
type TLSServer struct {
	CertFile       string `yaml:"certFile"`
	KeyFile        string `yaml:"keyFile"`
	TrustedCAFile  string `yaml:"trustedCAFile"`
	ClientCertAuth bool   `yaml:"clientCertAuth"`
}

// TLSClient is a client certificate and the CA to trust.
type TLSClient struct {
	CertFile      string `yaml:"certFile"`
	KeyFile       string `yaml:"keyFile"`
	TrustedCAFile string `yaml:"trustedCAFile"`
}

// Auth: when the cluster has etcd auth enabled, the agent logs in with the
// credentials in CredentialsFile ("user:password" on the first line). The
// password is never logged.
type Auth struct {
	CredentialsFile string `yaml:"credentialsFile"`
}

// Backup configures scheduled snapshots (package backup).
type Backup struct {
	// Dir is where each agent keeps its verified snapshots; {name} is the
	// member's name. Empty: <agent.stateDir>/backups.
	Dir string `yaml:"dir"`
	// Interval between scheduled snapshots; 0 turns them off.
	Interval Duration `yaml:"interval"`
	// Keep is how many of the newest verified snapshots are kept.
	Keep int `yaml:"keep"`
	// S3: also upload every verified snapshot there (optional).
	S3 S3 `yaml:"s3"`
	// Encryption: who can read the snapshots (see Encryption).
	Encryption Encryption `yaml:"encryption"`
	// DrillInterval is how often the agent restores the newest snapshot
	// (from S3 when set, else its own) into a scratch dir and times it:
	// the restore drill. 0 turns it off.
	DrillInterval Duration `yaml:"drillInterval"`
}

// Encryption says how snapshots are encrypted at rest: to age X25519
// recipients, or, only when Plaintext says so, not at all.
type Encryption struct {
	// Recipients are age X25519 public keys (age1...): every snapshot is
	// encrypted to all of them before it touches disk or S3. Adding one
	// takes effect at the next snapshot.
	Recipients []string `yaml:"recipients"`
	// RecipientsFile holds more of them, one a line ('#' comments), as
	// age -R reads: for keys made on the hosts (the demo's) or managed
	// apart from the spec. Read at each snapshot, so that a line added
	// takes effect at the next one; owned by the agent's user or root and
	// writable by no one else (whoever can write it chooses who reads
	// every later snapshot). Every host that takes snapshots needs it.
	RecipientsFile string `yaml:"recipientsFile"`
	// IdentityFile holds the age identities (AGE-SECRET-KEY-1..., one a
	// line) that read them, on the hosts that restore: mode 0600, owned
	// by the agent's user. A host without the file takes, uploads,
	// prunes and checks snapshots' integrity, but cannot restore them.
	IdentityFile string `yaml:"identityFile"`
	// Plaintext: snapshots are written unencrypted, and the spec says so
	// on purpose. Excludes Recipients and RecipientsFile.
	Plaintext bool `yaml:"plaintext"`
}

// Encrypts: snapshots are encrypted (recipients are given, in the spec
// or in a file).
func (e Encryption) Encrypts() bool { return len(e.Recipients) > 0 || e.RecipientsFile != "" }

// Unacknowledged: snapshots are written in plaintext without the spec
// saying so (no recipients, no plaintext: true): a spec from before
// encryption.
func (e Encryption) Unacknowledged() bool { return !e.Encrypts() && !e.Plaintext }

// S3 is an S3-compatible bucket that verified snapshots are uploaded to.
type S3 struct {
	// Endpoint is the service's URL, e.g. https://s3.example.net; buckets
	// are addressed path-style (https://s3.example.net/bucket/key).
	Endpoint string `yaml:"endpoint"`
	Bucket   string `yaml:"bucket"`
	// Prefix is put before each object name, e.g. prod/.
	Prefix string `yaml:"prefix"`
	Region string `yaml:"region"`
	// CredentialsFile holds the access key and the secret: one line
	// ACCESS_KEY:SECRET, or aws_access_key_id = / aws_secret_access_key =
	// lines as in ~/.aws/credentials.
	CredentialsFile string `yaml:"credentialsFile"`
	// CAFile is the CA that signs the endpoint's certificate (default:
	// the system's CAs).
	CAFile string `yaml:"caFile"`
}

// Enabled: an endpoint is set.
func (s S3) Enabled() bool { return s.Endpoint != "" }
