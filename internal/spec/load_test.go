package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// writeSpec puts text in a spec file inside a fresh dir and returns its path.
func writeSpec(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadValid(t *testing.T) {
	path := writeSpec(t, `cluster: {name: prod}
members:
  - name: n1
    peerURLs: [http://10.0.0.1:2380, http://n1.example:2381]
    clientURLs: [http://localhost:2379]
  - name: n2
    peerURLs: [http://10.0.0.2:2380]
    clientURLs: [http://10.0.0.2:2379]
    listenClientURLs: [http://0.0.0.0:2379]
    dataDir: other/../n2data/
    agentAddr: 10.0.0.2:2378
etcd:
  dataDir: data/{name}
  flags:
    --snapshot-count: 10000
    quota-backend-bytes: "8589934592"
agent:
  stateDir: /srv/state/{name}
  interval: 5s
repair:
  enabled: false
  minFreeMB: 0
`)
	dir := filepath.Dir(path)
	off, on := false, true
	want := &Spec{
		Cluster: Cluster{Name: "prod"},
		Members: []Member{{
			Name:             "n1",
			PeerURLs:         []string{"http://10.0.0.1:2380", "http://n1.example:2381"},
			ClientURLs:       []string{"http://localhost:2379"},
			ListenPeerURLs:   []string{"http://10.0.0.1:2380", "http://0.0.0.0:2381"},
			ListenClientURLs: []string{"http://127.0.0.1:2379"},
			DataDir:          filepath.Join(dir, "data/n1"),
			AgentAddr:        "127.0.0.1:2378",
			StateDir:         "/srv/state/n1",
			BackupDir:        filepath.Join(dir, "data/n1/.etcdkeeper-backups"),
			SnapshotDir:      "/srv/state/n1/backups",
			Flags:            map[string]string{},
			Line:             3,
		}, {
			Name:             "n2",
			PeerURLs:         []string{"http://10.0.0.2:2380"},
			ClientURLs:       []string{"http://10.0.0.2:2379"},
			ListenPeerURLs:   []string{"http://10.0.0.2:2380"},
			ListenClientURLs: []string{"http://0.0.0.0:2379"},
			DataDir:          filepath.Join(dir, "n2data"),
			AgentAddr:        "10.0.0.2:2378",
			StateDir:         "/srv/state/n2",
			BackupDir:        filepath.Join(dir, "n2data/.etcdkeeper-backups"),
			SnapshotDir:      "/srv/state/n2/backups",
			Flags:            map[string]string{},
			Line:             6,
		}},
		Etcd: Etcd{
			DataDir: filepath.Join(dir, "data/{name}"),
			Flags:   map[string]string{"snapshot-count": "10000", "quota-backend-bytes": "8589934592"},
		},
		Agent: Agent{
			Addr:           "127.0.0.1:2378",
			StateDir:       "/srv/state/{name}",
			Interval:       Duration{5 * time.Second},
			LearnerTimeout: Duration{2 * time.Minute},
			StopTimeout:    Duration{10 * time.Second},
		},
		Repair:      Repair{Enabled: &off, Snapshot: &on, MaxPerHour: 3, KeepBackups: 5, MinFreeMB: 0, SnapshotMaxAge: Duration{2 * time.Hour}},
		Backup:      Backup{Interval: Duration{time.Hour}, Keep: 24, DrillInterval: Duration{24 * time.Hour}},
		Maintenance: Maintenance{Defrag: Defrag{Enabled: &on, MinFreeRatio: 0.5, MinFreeBytes: 256 << 20}, MaxDisrupted: 1, HostTurnTimeout: Duration{15 * time.Minute}},
		Path:        path,
		// Backups on by default, with no recipients: plaintext, said.
		Warnings: Errors{{File: path, Line: 1, Msg: "backup: NO ENCRYPTION: snapshots are taken in plaintext (the whole keyspace, Kubernetes Secrets included, readable by whoever reads a backup dir or the bucket): give backup.encryption.recipients (age-keygen; docs/backups.md), or say backup.encryption.plaintext: true to keep them plaintext on purpose"}},
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Generation) != 12 {
		t.Errorf("Generation = %q, want 12 hex digits", got.Generation)
	}
	want.Generation = got.Generation
	want.Etcd.Line = got.Etcd.Line // etcd:'s line; TestCheckEtcdBinary checks lines
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
	assertRoundTrip(t, got)
}

// assertRoundTrip: a loaded spec written back out loads to the same spec,
// so the effective spec can be shown to operators as YAML.
func assertRoundTrip(t *testing.T, s *Spec) {
	t.Helper()
	out, err := yaml.Marshal(s)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	again, err := Parse(out, s.Path)
	if err != nil {
		t.Fatalf("reparse of\n%s\nfailed: %v", out, err)
	}
	if a, b := comparable(s), comparable(again); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip changed the spec:\n got %+v\nwant %+v", b, a)
	}
}

// comparable drops what depends on the file's bytes rather than its meaning.
func comparable(s *Spec) Spec {
	c := *s
	c.Generation = ""
	c.Etcd.Line = 0
	c.Members = append([]Member(nil), s.Members...)
	for i := range c.Members {
		c.Members[i].Line = 0
	}
	// A warning about a key that was not written points at line 1, and
	// at the key once the spec is written back out with every key.
	c.Warnings = append(Errors(nil), s.Warnings...)
	for i := range c.Warnings {
		c.Warnings[i].Line = 0
	}
	return c
}

func TestDefaults(t *testing.T) {
	s, err := Parse([]byte(`cluster: {name: c}
members: [{name: solo, peerURLs: ["http://[::1]:2380"], clientURLs: [http://db.example:2379]}]
`), "/etc/etcdkeeper/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Members[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"etcd.dataDir", s.Etcd.DataDir, "/var/lib/etcd/{name}"},
		{"agent.addr", s.Agent.Addr, "127.0.0.1:2378"},
		{"agent.stateDir", s.Agent.StateDir, "/var/lib/etcdkeeper/{name}"},
		{"agent.backupDir", s.Agent.BackupDir, ""},
		{"agent.interval", s.Agent.Interval.Duration, 2 * time.Second},
		{"agent.learnerTimeout", s.Agent.LearnerTimeout.Duration, 2 * time.Minute},
		{"agent.stopTimeout", s.Agent.StopTimeout.Duration, 10 * time.Second},
		{"repair.enabled", *s.Repair.Enabled, true},
		{"repair.maxPerHour", s.Repair.MaxPerHour, 3},
		{"maintenance.maxDisrupted", s.Maintenance.MaxDisrupted, 1},
		{"repair.keepBackups", s.Repair.KeepBackups, 5},
		{"repair.minFreeMB", s.Repair.MinFreeMB, int64(256)},
		{"repair.snapshotMaxAge", s.Repair.SnapshotMaxAge.Duration, 2 * time.Hour},
		{"etcd.flags", s.Etcd.Flags, map[string]string{}},
		{"DataDir", m.DataDir, "/var/lib/etcd/solo"},
		{"StateDir", m.StateDir, "/var/lib/etcdkeeper/solo"},
		{"BackupDir", m.BackupDir, "/var/lib/etcd/solo/.etcdkeeper-backups"},
		{"SnapshotDir", m.SnapshotDir, "/var/lib/etcdkeeper/solo/backups"},
		{"backup.dir", s.Backup.Dir, ""},
		{"backup.interval", s.Backup.Interval.Duration, time.Hour},
		{"backup.keep", s.Backup.Keep, 24},
		{"backup.s3", s.Backup.S3.Enabled(), false},
		{"AgentAddr", m.AgentAddr, "127.0.0.1:2378"},
		{"ListenPeerURLs", m.ListenPeerURLs, []string{"http://[::1]:2380"}},
		{"ListenClientURLs", m.ListenClientURLs, []string{"http://0.0.0.0:2379"}},
		{"Line", m.Line, 2},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

// TestSnapshotMaxAgeDefault: reuse of a verified scheduled snapshot is on
// whenever scheduled snapshots are, up to two intervals old; a value the
// spec gives, 0s included, stands.
func TestSnapshotMaxAgeDefault(t *testing.T) {
	const head = "cluster: {name: c}\nmembers: [{name: solo, peerURLs: [\"http://[::1]:2380\"], clientURLs: [http://db.example:2379]}]\n"
	tests := []struct {
		name, yaml string
		want       time.Duration
	}{
		{"scheduled snapshots by default (1h)", "", 2 * time.Hour},
		{"a shorter schedule", "backup: {interval: 15m}\n", 30 * time.Minute},
		{"scheduled snapshots off", "backup: {interval: 0s}\n", 0},
		{"given 0s: a fresh safety snapshot every repair", "repair: {snapshotMaxAge: 0s}\n", 0},
		{"given", "repair: {snapshotMaxAge: 10m}\nbackup: {interval: 15m}\n", 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(head+tt.yaml), "/etc/etcdkeeper/cluster.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Repair.SnapshotMaxAge.Duration; got != tt.want {
				t.Errorf("repair.snapshotMaxAge = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDeriveListen(t *testing.T) {
	tests := []struct {
		name       string
		advertised []string
		want       []string
	}{
		{"IP listens on itself", []string{"https://10.1.2.3:2380"}, []string{"https://10.1.2.3:2380"}},
		{"localhost is loopback", []string{"http://LocalHost:2379"}, []string{"http://127.0.0.1:2379"}},
		{"a name listens everywhere", []string{"http://etcd-0.etcd:2380"}, []string{"http://0.0.0.0:2380"}},
		{"IPv6", []string{"http://[fd00::1]:2380"}, []string{"http://[fd00::1]:2380"}},
		{"two names, one port: one bind", []string{"http://a:2380", "http://b:2380"}, []string{"http://0.0.0.0:2380"}},
		{"wildcard covers the IP on its port", []string{"http://10.0.0.1:2380", "http://a:2380", "http://10.0.0.1:2381"},
			[]string{"http://0.0.0.0:2380", "http://10.0.0.1:2381"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listenURLs(tt.advertised); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("listenURLs(%q) = %q, want %q", tt.advertised, got, tt.want)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	s, err := Parse([]byte(`cluster: {name: c}
members:
  - {name: b, peerURLs: [http://10.0.0.2:2380, http://b:2380], clientURLs: [http://10.0.0.2:2379]}
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Names(), []string{"b", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if m, ok := s.Lookup("a"); !ok || m.PeerURLs[0] != "http://10.0.0.1:2380" {
		t.Errorf("Lookup(a) = %+v, %v", m, ok)
	}
	if _, ok := s.Lookup("z"); ok {
		t.Error("Lookup(z) found a member")
	}
}

func TestLoadExample(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "cluster.yaml")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Names(), []string{"node1", "node2", "node3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	for i, m := range s.Members {
		if want := fmt.Sprintf("http://127.0.0.%d:2380", i+1); !reflect.DeepEqual(m.PeerURLs, []string{want}) {
			t.Errorf("%s peerURLs = %q, want [%s]", m.Name, m.PeerURLs, want)
		}
	}
	m, _ := s.Lookup("node2")
	if want := filepath.Join(examples, "data/node2/etcd"); m.DataDir != want {
		t.Errorf("node2 DataDir = %q, want %q (relative to the spec file)", m.DataDir, want)
	}
	if want := filepath.Join(examples, "data/node2/state"); m.StateDir != want {
		t.Errorf("node2 StateDir = %q, want %q", m.StateDir, want)
	}
	if m.AgentAddr != "127.0.0.2:2378" || m.ListenClientURLs[0] != "http://127.0.0.2:2379" {
		t.Errorf("node2 = %+v", m)
	}
	assertRoundTrip(t, s)
}

// TestLoadBackup: backup.dir expands {name} and is relative to the spec
// file, interval 0 is off (not defaulted), and the S3 files are read.
func TestLoadBackup(t *testing.T) {
	path := writeSpec(t, twoLocalForBackup+`backup:
  dir: snaps/{name}
  interval: 0s
  keep: 3
  s3:
    endpoint: https://s3.example.net
    bucket: etcd-backups
    prefix: prod/
    credentialsFile: s3.credentials
`)
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, "s3.credentials"), []byte("[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Members[1].SnapshotDir, filepath.Join(dir, "snaps/b"); got != want {
		t.Errorf("SnapshotDir = %q, want %q", got, want)
	}
	if s.Backup.Interval.Duration != 0 || s.Backup.Keep != 3 {
		t.Errorf("backup = %+v, want interval 0 (off), keep 3", s.Backup)
	}
	if want := filepath.Join(dir, "s3.credentials"); s.Backup.S3.CredentialsFile != want || !s.Backup.S3.Enabled() {
		t.Errorf("s3 = %+v", s.Backup.S3)
	}
	assertRoundTrip(t, s)
}

const twoLocalForBackup = `cluster: {name: t}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
`

func TestParseS3Credentials(t *testing.T) {
	tests := []struct {
		name, in, key, secret, err string
	}{
		{"one line", "AK:S:K\n", "AK", "S:K", ""},
		{"aws file", "# c\n[default]\naws_access_key_id=AK\n aws_secret_access_key = SK \n", "AK", "SK", ""},
		{"aws file, secret missing", "[default]\naws_access_key_id=AK\n", "", "", "no credentials"},
		{"no colon", "justakey\n", "", "", "ACCESS_KEY:SECRET"},
		{"empty secret", "AK:\n", "", "", "ACCESS_KEY:SECRET"},
		{"empty", "", "", "", "no credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, s, err := ParseS3Credentials([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "AK") {
					t.Fatalf("err = %v, want one about %q that quotes nothing", err, tt.err)
				}
				return
			}
			if err != nil || k != tt.key || s != tt.secret {
				t.Fatalf("= %q, %q, %v; want %q, %q", k, s, err, tt.key, tt.secret)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestDuration(t *testing.T) {
	var d struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 1m30s"), &d); err != nil || d.D.Duration != 90*time.Second {
		t.Fatalf("Unmarshal = %v, %v", d.D, err)
	}
	out, err := yaml.Marshal(d)
	if err != nil || strings.TrimSpace(string(out)) != "d: 1m30s" {
		t.Fatalf("Marshal = %q, %v", out, err)
	}
	err = yaml.Unmarshal([]byte("\nd: soon"), &d)
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Unmarshal(soon) = %v, want an error naming line 2", err)
	}
}

// TestLoadHostileFile: a spec is a regular file of a sane size; /dev/zero
// or a huge file is refused before it is read.
func TestLoadHostileFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "/dev/zero: not a regular file",
		dir:         "not a regular file",
		big:         "larger than",
	} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%s) = %v, want an error with %q", path, err, want)
		}
	}
}
