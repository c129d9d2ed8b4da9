package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// onHost makes the CLI see host as the kernel's host name for one test.
func onHost(t *testing.T, host string) {
	t.Helper()
	was := hostname
	hostname = func() string { return host }
	t.Cleanup(func() { hostname = was })
}

// runBackup runs `etcdkeeper backup ARGS...` and returns its stdout,
// stderr and error.
func runBackup(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	c := backupCmd()
	var stdout, stderr bytes.Buffer
	c.SetOut(&stdout)
	c.SetErr(&stderr)
	c.SetArgs(args)
	err := c.Execute()
	return stdout.String(), stderr.String(), err
}

func writeSpec(t *testing.T, root, body string) string {
	t.Helper()
	path := filepath.Join(root, "cluster.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(body, "ROOT", root)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plantSnapshot writes a snapshot file and its sidecar as an agent's
// schedule would (the list does not read the db).
func plantSnapshot(t *testing.T, dir, member string, seq int64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := backup.FileName("c1", time.Date(2026, 12, 1, 10, 0, int(seq), 0, time.UTC), 100+seq)
	if err := os.WriteFile(filepath.Join(dir, file), []byte("db"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(backup.Sidecar{Writer: "etcdkeeper", By: backup.BySchedule, Cluster: "c1", Member: member, File: file, Seq: seq, Verified: true, SHA256: "x"})
	if err := os.WriteFile(filepath.Join(dir, backup.SidecarName(file)), sc, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

const twoMembers = `cluster: {name: c1}
members:
  - {name: node1, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: node2, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
agent:
  stateDir: "ROOT/state/{name}"
backup:
  dir: "ROOT/snaps/{name}"
`

// TestBackupListOnAnyHost: `backup list --config F` on a host that runs
// no member lists every member's backups found on it; on a member's host
// named by its FQDN it does the same; --name narrows it to one member.
func TestBackupListOnAnyHost(t *testing.T) {
	root := t.TempDir()
	path := writeSpec(t, root, twoMembers)
	f1 := plantSnapshot(t, filepath.Join(root, "snaps", "node1"), "node1", 1)
	f2 := plantSnapshot(t, filepath.Join(root, "snaps", "node2"), "node2", 2)
	for _, host := range []string{"vm", "node1.example.com"} {
		onHost(t, host)
		out, stderr, err := runBackup(t, "list", "--config", path)
		if err != nil || !strings.Contains(out, f1) || !strings.Contains(out, f2) {
			t.Errorf("on host %s: backup list = %v, stdout:\n%s\nstderr: %s\nwant both members' snapshots", host, err, out, stderr)
		}
		if i1, i2 := strings.Index(out, f1), strings.Index(out, f2); i2 > i1 {
			t.Errorf("on host %s: not newest first:\n%s", host, out)
		}
	}
	out, _, err := runBackup(t, "list", "--config", path, "--name", "node2", "-o", "json")
	var entries []backup.Entry
	if err == nil {
		err = json.Unmarshal([]byte(out), &entries)
	}
	if err != nil || len(entries) != 1 || entries[0].File != f2 {
		t.Errorf("backup list --name node2 -o json = %v, %s; want only %s", err, out, f2)
	}
}

// TestBackupListWarnsAboutAnOpenDir: a backup dir other users can write
// to is listed with a warning, and a file another user planted shows as
// not verified, whatever its sidecar claims.
func TestBackupListWarnsAboutAnOpenDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to uid 65534")
	}
	root := t.TempDir()
	path := writeSpec(t, root, twoMembers)
	dir := filepath.Join(root, "snaps", "node1")
	f := plantSnapshot(t, dir, "node1", 1)
	for _, p := range []string{f, backup.SidecarName(f)} {
		if err := os.Chown(filepath.Join(dir, p), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	onHost(t, "vm")
	out, stderr, err := runBackup(t, "list", "--config", path)
	if err != nil || !strings.Contains(stderr, "writable by group or others") || !strings.Contains(out, "no: the file is owned by uid 65534") {
		t.Errorf("backup list = %v, stdout:\n%s\nstderr: %s\nwant a warning about the dir and the planted file not verified", err, out, stderr)
	}
}

// TestBackupSaveOnAnyHost: `backup save --config F` takes a snapshot from
// a healthy member whatever host it runs on: on a host that runs no
// member into --out or the backup.dir all members share (and refuses,
// asking for --out, when backup.dir is per member); on a member's host
// named by its FQDN into that member's backup.dir.
func TestBackupSaveOnAnyHost(t *testing.T) {
	ep, peer := testetcd.Start(t)
	root := t.TempDir()
	spec := func(dir string) string {
		return writeSpec(t, root, fmt.Sprintf(`cluster: {name: c1}
members:
  - {name: default, peerURLs: [%s], clientURLs: [%s]}
agent:
  stateDir: "ROOT/state/{name}"
backup:
  dir: "%s"
`, peer, ep, dir))
	}
	saved := func(t *testing.T, dir, member string) {
		t.Helper()
		entries, err := backup.List(dir, "c1")
		if err != nil || len(entries) != 1 || !entries[0].Verified() || entries[0].Sidecar.By != backup.ByHand || entries[0].Sidecar.Member != member {
			t.Fatalf("in %s: %+v, %v; want one verified snapshot saved by hand for member %q", dir, entries, err, member)
		}
	}

	onHost(t, "vm")
	out := filepath.Join(root, "out")
	if stdout, _, err := runBackup(t, "save", "--config", spec("ROOT/shared"), "--out", out); err != nil {
		t.Fatalf("backup save --out on host vm: %v (%s)", err, stdout)
	}
	saved(t, out, "")
	if _, _, err := runBackup(t, "save", "--config", spec("ROOT/shared")); err != nil {
		t.Fatalf("backup save on host vm with a shared backup.dir: %v", err)
	}
	saved(t, filepath.Join(root, "shared"), "")
	two := writeSpec(t, root, twoMembers)
	if _, _, err := runBackup(t, "save", "--config", two); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("backup save on host vm with a per-member backup.dir = %v, want a refusal asking for --out", err)
	}

	onHost(t, "default.example.com")
	if _, _, err := runBackup(t, "save", "--config", spec("ROOT/snaps/{name}")); err != nil {
		t.Fatalf("backup save on host default.example.com: %v", err)
	}
	saved(t, filepath.Join(root, "snaps", "default"), "default")
}

// TestRunMemberName: the agent's default --name follows spec.ForHost.
func TestRunMemberName(t *testing.T) {
	root := t.TempDir()
	s, err := spec.Load(writeSpec(t, root, twoMembers))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ host, flag, want string }{
		{"node1", "", "node1"},
		{"node2.example.com", "", "node2"},
		{"vm", "", "vm"}, // the agent then refuses it, naming the members
		{"node1.example.com", "node2", "node2"},
	} {
		onHost(t, tt.host)
		if got := memberName(s, tt.flag); got != tt.want {
			t.Errorf("on host %s with --name %q: %q, want %q", tt.host, tt.flag, got, tt.want)
		}
	}
}
