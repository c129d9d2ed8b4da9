package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// fakeEtcd writes a script that answers --version like etcd does.
func fakeEtcd(t *testing.T, version string) (path, sum string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "etcd")
	text := "#!/bin/sh\necho 'etcd Version: " + version + "'\necho 'Git SHA: test'\n"
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(text))
	return path, hex.EncodeToString(h[:])
}

// TestCheckBinary: before every start, etcd.binary must say its version
// and have etcd.sha256; a mismatch is an error and nothing starts.
func TestCheckBinary(t *testing.T) {
	path, sum := fakeEtcd(t, "3.6.16")
	tests := []struct {
		name string
		etcd spec.Etcd
		want string // error part; "" ok
	}{
		{"built in", spec.Etcd{}, ""},
		{"external, no checksum", spec.Etcd{Binary: path}, ""},
		{"external, its checksum", spec.Etcd{Binary: path, SHA256: sum}, ""},
		{"external, another checksum", spec.Etcd{Binary: path, SHA256: strings.Repeat("0", 64)}, "not starting etcd: " + path + " has sha256 " + sum + ", but etcd.sha256"},
		{"missing", spec.Etcd{Binary: path + ".gone"}, "not starting etcd: etcd binary: stat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{lg: zap.NewNop()}
			b, err := a.checkBinary(&spec.Spec{Path: "cluster.yaml", Etcd: tt.etcd})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("checkBinary = %v, want error containing %q", err, tt.want)
			}
			if err == nil && tt.etcd.Binary != "" && b.Version.String() != "3.6.16" {
				t.Errorf("version %s, want 3.6.16", b.Version)
			}
		})
	}
}

// TestBinaryChange: what makes a restart due, and how it reads.
func TestBinaryChange(t *testing.T) {
	v := func(s string) spec.Version { out, _ := spec.ParseVersion(s); return out }
	old := spec.Binary{Path: "/opt/etcd-3.6/etcd", Version: v("3.6.16"), SHA256: "aa"}
	tests := []struct {
		name string
		want spec.Binary
		out  string
	}{
		{"the same", old, ""},
		{"another version", spec.Binary{Path: "/opt/etcd-3.7/etcd", Version: v("3.7.3"), SHA256: "bb"}, "etcd 3.6.16 → 3.7.3"},
		{"another path, same version", spec.Binary{Path: "/usr/bin/etcd", Version: v("3.6.16"), SHA256: "aa"}, "etcd binary /opt/etcd-3.6/etcd → /usr/bin/etcd (3.6.16)"},
		{"replaced in place", spec.Binary{Path: old.Path, Version: v("3.6.16"), SHA256: "cc"}, "etcd binary /opt/etcd-3.6/etcd changed on disk (3.6.16)"},
		{"to the built-in one", spec.Binary{Version: v("3.6.16")}, "etcd binary /opt/etcd-3.6/etcd → built-in (3.6.16)"},
	}
	for _, tt := range tests {
		if got := binaryChange(old, tt.want); got != tt.out {
			t.Errorf("%s: binaryChange = %q, want %q", tt.name, got, tt.out)
		}
	}
}

// TestRestartDueOnlyForWhatThisAgentStarted: the settings a restart is
// judged against are those this agent process started etcd with, never
// an older agent's. So new default flags in a new etcdkeeper (the
// StopGRPCServiceOnDefrag gate) start no rollout by themselves: they
// reach each member when the upgraded agent starts its etcd, which the
// package upgrade does anyway; a spec edit of the flags still rolls.
func TestRestartDueOnlyForWhatThisAgentStarted(t *testing.T) {
	s := &spec.Spec{Path: "cluster.yaml", Cluster: spec.Cluster{Name: "c"}}
	self := spec.Member{Name: "n1", DataDir: "/var/lib/etcd"}
	edited := &spec.Spec{Path: "cluster.yaml", Cluster: spec.Cluster{Name: "c"}, Etcd: spec.Etcd{Flags: map[string]string{"snapshot-count": "5000"}}}
	tests := []struct {
		name     string
		settings string // what this agent started etcd with; "" none yet
		spec     *spec.Spec
		want     string
	}{
		{"no etcd started by this agent yet (just upgraded)", "", s, ""},
		{"started with the spec as it is", etcdproc.Settings(s, self), s, ""},
		{"the spec's flags edited since", etcdproc.Settings(s, self), edited, "changed settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{lg: zap.NewNop(), settings: tt.settings}
			r, _ := a.restartDue(tt.spec, self)
			if r.Why != tt.want {
				t.Errorf("restart due %q, want %q", r.Why, tt.want)
			}
		})
	}
	if !strings.Contains(etcdproc.Settings(s, self), "StopGRPCServiceOnDefrag=true") {
		t.Errorf("the default settings %q lack StopGRPCServiceOnDefrag=true", etcdproc.Settings(s, self))
	}
}

// TestUnlockedRestartMarkDropped: a restart taken without the cluster
// lock (a quota raise under NOSPACE) sets the catching-up mark like a
// rollout's; with no lock to release, the release still drops it, so
// that a lock taken later for something else is not held while the
// member lags (reconcile.restartedCatchingUp).
func TestUnlockedRestartMarkDropped(t *testing.T) {
	a := &Agent{lg: zap.NewNop(), restarted: true}
	a.releaseLock(context.Background())
	if a.restarted {
		t.Fatal("the restart's mark outlived a release with no lock held")
	}
}

// TestBinaryReplacedKeepingSizeAndMtime is G4 (safety review 2026-12-03):
// etcd.binary replaced by another file of the same size with its mtime
// kept (cp -p, rsync -a, install -p) is hashed again: the check before a
// start refuses it against etcd.sha256, and the restart rule sees it
// changed. 7595587 trusted its cached hash by size and mtime.
func TestBinaryReplacedKeepingSizeAndMtime(t *testing.T) {
	path, sum := fakeEtcd(t, "3.6.16")
	s := &spec.Spec{Path: "cluster.yaml", Etcd: spec.Etcd{Binary: path, SHA256: sum}}
	a := &Agent{lg: zap.NewNop()}
	running, err := a.checkBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	evil := []byte(strings.Replace(string(old), "Git SHA: test", "Git SHA: evil", 1))
	if len(evil) != len(old) {
		t.Fatal("the replacement must keep the size")
	}
	if err := os.WriteFile(path, evil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	want, err := a.wantedBinary(s)
	if err != nil {
		t.Fatal(err)
	}
	if why := binaryChange(running, want); !strings.Contains(why, "changed on disk") {
		t.Errorf("the restart rule sees %q for the replaced file, want it changed on disk", why)
	}
	if _, err := a.checkBinary(s); err == nil || !strings.Contains(err.Error(), "but etcd.sha256") {
		t.Errorf("the check before a start of a same-size, same-mtime replacement: %v, want the sha256 refusal", err)
	}
}
