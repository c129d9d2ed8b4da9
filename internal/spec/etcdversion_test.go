package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func v(s string) Version {
	out, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return out
}

// TestPreflight: etcd's upgrade and downgrade rules, a row each.
func TestPreflight(t *testing.T) {
	tests := []struct {
		name        string
		cluster, to string
		running     []string
		want        Move
		reason      string
	}{
		{"a patch release", "3.6.0", "3.6.16", []string{"3.6.13"}, MoveNone, ""},
		{"a patch down", "3.6.0", "3.6.13", []string{"3.6.16"}, MoveNone, ""},
		{"one minor up", "3.6.0", "3.7.3", []string{"3.6.16"}, MoveUpgrade, ""},
		{"two minors up", "3.5.0", "3.7.3", []string{"3.5.26"}, MoveRefused, "etcd 3.7.3 is more than one minor ahead of the cluster version 3.5: etcd upgrades one minor at a time; roll to 3.6.x first"},
		{"3.5.26 to 3.6", "3.5.0", "3.6.16", []string{"3.5.26", "3.5.30"}, MoveUpgrade, ""},
		{"3.5 below 3.5.26 to 3.6", "3.5.0", "3.6.16", []string{"3.5.26", "3.5.21"}, MoveRefused, "a member runs etcd 3.5.21, below 3.5.26: upgrade every member to 3.5.26 or later first"},
		{"another major", "3.6.0", "4.0.0", nil, MoveRefused, "another major version"},
		{"one minor down from 3.7", "3.7.0", "3.6.16", []string{"3.7.3"}, MoveDowngrade, ""},
		{"one minor down from 3.6", "3.6.0", "3.5.26", []string{"3.6.16"}, MoveDowngrade, ""},
		{"two minors down", "3.7.0", "3.5.26", nil, MoveRefused, "more than one minor below the cluster version 3.7"},
		{"down from 3.5: etcd cannot", "3.5.0", "3.4.30", nil, MoveRefused, "etcd supports downgrades only from 3.6 on"},
		{"no cluster version known", "", "3.7.3", nil, MoveNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cluster Version
			if tt.cluster != "" {
				cluster = v(tt.cluster)
			}
			var running []Version
			for _, r := range tt.running {
				running = append(running, v(r))
			}
			got, why := Preflight(cluster, v(tt.to), running)
			if got != tt.want || !strings.Contains(why, tt.reason) || (tt.reason == "") != (why == "") {
				t.Fatalf("Preflight = %v %q, want %v containing %q", got, why, tt.want, tt.reason)
			}
		})
	}
}

func TestParseVersionOutput(t *testing.T) {
	tests := []struct {
		out  string
		want string
		err  bool
	}{
		{"etcd Version: 3.6.16\nGit SHA: GitNotFound\nGo Version: go1.26.8\nGo OS/Arch: linux/amd64\n", "3.6.16", false},
		{"etcd Version: 3.7.0-rc.1\n", "3.7.0", false},
		{"Usage: etcd [flags]\n", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		got, err := ParseVersionOutput(tt.out)
		if (err != nil) != tt.err || (err == nil && got.String() != tt.want) {
			t.Errorf("ParseVersionOutput(%q) = %v, %v; want %s (error %v)", tt.out, got, err, tt.want, tt.err)
		}
	}
}

func TestRemovedFlag(t *testing.T) {
	tests := []struct {
		flag, version, want string
	}{
		{"enable-v2", "3.5.26", ""},
		{"enable-v2", "3.6.16", "3.6"},
		{"enable-v2", "3.7.3", "3.6"},
		{"experimental-compact-hash-check-enabled", "3.6.16", ""},
		{"experimental-compact-hash-check-enabled", "3.7.3", "3.7"},
		{"compact-hash-check-time", "3.7.3", ""},
	}
	for _, tt := range tests {
		if got := RemovedFlag(tt.flag, v(tt.version)); got != tt.want {
			t.Errorf("RemovedFlag(%s, %s) = %q, want %q", tt.flag, tt.version, got, tt.want)
		}
	}
}

// TestCheckEtcdBinary: what validate (spec.Load) says of the external
// binary, each a FILE:LINE error naming the version.
func TestCheckEtcdBinary(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	text := func(etcd string) string {
		return "cluster: {name: t}\nmembers:\n  - {name: a, peerURLs: [\"http://127.0.0.1:2380\"], clientURLs: [\"http://127.0.0.1:2379\"]}\netcd:\n" + etcd
	}
	read := func(version, sha string) func(string) (Binary, error) {
		return func(p string) (Binary, error) { return Binary{Path: p, Version: v(version), SHA256: sha}, nil }
	}
	tests := []struct {
		name string
		etcd string
		read func(string) (Binary, error)
		want string // "" valid
	}{
		{"a 3.6 binary without removed flags", "  binary: /opt/etcd\n", read("3.6.16", sum), ""},
		{"the checksum matches", "  binary: /opt/etcd\n  sha256: " + sum + "\n", read("3.6.16", sum), ""},
		{"the checksum differs", "  binary: /opt/etcd\n  sha256: " + sum + "\n", read("3.6.16", strings.Repeat("f", 64)),
			"spec.yaml:6: etcd.sha256: /opt/etcd has sha256 ffff"},
		{"3.6 removed --enable-v2", "  binary: /opt/etcd\n  flags:\n    enable-v2: \"true\"\n", read("3.6.16", sum),
			"spec.yaml:7: etcd.flags.enable-v2: etcd 3.6.16 (etcd.binary) has no --enable-v2: etcd 3.6 removed it"},
		{"3.7 removed the experimental- names", "  binary: /opt/etcd\n  flags:\n    experimental-snapshot-catchup-entries: \"5000\"\n", read("3.7.3", sum),
			"spec.yaml:7: etcd.flags.experimental-snapshot-catchup-entries: etcd 3.7.3 (etcd.binary) has no --experimental-snapshot-catchup-entries: etcd 3.7 removed it"},
		{"a 3.5 binary", "  binary: /opt/etcd\n", read("3.5.26", sum),
			"spec.yaml:5: etcd.binary: /opt/etcd is etcd 3.5.26: etcdkeeper runs etcd 3.6 or later"},
		{"a 3.5 binary, its flags not checked as well", "  binary: /opt/etcd\n  flags:\n    enable-v2: \"true\"\n", read("3.5.21", sum),
			"spec.yaml:5: etcd.binary: /opt/etcd is etcd 3.5.21"},
		{"a binary that does not run", "  binary: /opt/etcd\n", func(string) (Binary, error) { return Binary{}, errors.New("etcd binary: open /opt/etcd: no such file") },
			"spec.yaml:5: etcd.binary: etcd binary: open /opt/etcd: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, d, err := parse([]byte(text(tt.etcd)), "spec.yaml")
			if err != nil {
				t.Fatal(err)
			}
			errs := d.checkEtcdBinary(s, tt.read)
			got := errs.Error()
			if tt.want == "" && len(errs) > 0 || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("errors %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEtcdSHA256Field(t *testing.T) {
	base := "cluster: {name: t}\nmembers:\n  - {name: a, peerURLs: [\"http://127.0.0.1:2380\"], clientURLs: [\"http://127.0.0.1:2379\"]}\netcd:\n"
	for _, tt := range []struct{ etcd, want string }{
		{"  sha256: " + strings.Repeat("a", 64) + "\n", "spec.yaml:5: etcd.sha256: set without etcd.binary"},
		{"  binary: /opt/etcd\n  sha256: ABC\n", "spec.yaml:6: etcd.sha256: \"ABC\": want 64 lowercase hex digits"},
	} {
		_, err := Parse([]byte(base+tt.etcd), "spec.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.etcd, err, tt.want)
		}
	}
}

// TestLoadRunsEtcdBinary: Load (validate, every reload) runs the spec's
// etcd.binary and refuses a flag its version removed, at its line.
func TestLoadRunsEtcdBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'etcd Version: 3.6.16'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.yaml")
	text := "cluster: {name: t}\nmembers:\n  - {name: a, peerURLs: [\"http://127.0.0.1:2380\"], clientURLs: [\"http://127.0.0.1:2379\"]}\netcd:\n  binary: " + bin + "\n  flags:\n    enable-v2: \"true\"\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := path + ":7: etcd.flags.enable-v2: etcd 3.6.16 (etcd.binary) has no --enable-v2: etcd 3.6 removed it"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load = %v, want %q", err, want)
	}
}
