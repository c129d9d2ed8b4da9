package repair

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 19, 58, 53, 745000000, time.FixedZone("CET", 3600))

func makeDataDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0.wal"), []byte("wal"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestMoveAside(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "etcd")
	backups := filepath.Join(data, ".etcdkeeper-backups") // the default: inside the data dir
	makeDataDir(t, data)

	dest, err := MoveAside(data, backups, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(backups, "2026-11-29T18-58-53.745Z-etcd"); dest != want {
		t.Errorf("dest = %s, want %s (UTC, file-name safe)", dest, want)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "member", "wal", "0.wal")); err != nil || string(b) != "wal" {
		t.Errorf("moved content: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(data, "member")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("member dir still in the data dir: %v", err)
	}
	if st, _ := os.Stat(backups); st.Mode().Perm() != 0o700 {
		t.Errorf("backup dir mode %v, want 0700", st.Mode().Perm())
	}

	// Run again (a resumed repair step): nothing to move.
	if dest, err := MoveAside(data, backups, t0.Add(time.Minute)); dest != "" || err != nil {
		t.Errorf("second MoveAside = %q, %v; want \"\", nil", dest, err)
	}
	if dest, err := MoveAside(filepath.Join(root, "missing"), backups, t0.Add(time.Minute)); dest != "" || err != nil {
		t.Errorf("MoveAside of a missing dir = %q, %v; want \"\", nil", dest, err)
	}
	if _, err := os.Stat(data); err != nil {
		t.Errorf("the data dir itself must stay: %v", err)
	}
}

// TestCheckMoveAside: the dry run passes where MoveAside will work,
// fails (and changes nothing) where it will not, and leaves no probe.
func TestCheckMoveAside(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "etcd")
	makeDataDir(t, data)
	backups := filepath.Join(data, ".etcdkeeper-backups")
	if err := CheckMoveAside(data, backups); err != nil {
		t.Fatalf("check of a good layout: %v", err)
	}
	entries, _ := os.ReadDir(backups)
	left, _ := filepath.Glob(filepath.Join(data, ".etcdkeeper-probe-*"))
	if len(entries) != 0 || len(left) != 0 {
		t.Fatalf("the check left probes behind: %v %v", entries, left)
	}
	shm, err := os.MkdirTemp("/dev/shm", "repair-test-")
	if err != nil || sameFS(t, root, shm) {
		t.Skip("no second filesystem at /dev/shm")
	}
	defer os.RemoveAll(shm)
	if err := CheckMoveAside(data, filepath.Join(shm, "b")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("check across filesystems = %v, want EXDEV", err)
	}
	if _, err := os.Stat(filepath.Join(data, "member", "wal", "0.wal")); err != nil {
		t.Fatalf("data touched by the check: %v", err)
	}
}

func TestMoveAsideNeverOverwrites(t *testing.T) {
	root := t.TempDir()
	data, backups := filepath.Join(root, "etcd"), filepath.Join(root, "b")
	makeDataDir(t, data)
	if err := os.MkdirAll(filepath.Join(backups, "2026-11-29T18-58-53.745Z-etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := MoveAside(data, backups, t0); err == nil {
		t.Fatal("MoveAside replaced an existing backup")
	}
	if _, err := os.Stat(filepath.Join(data, "member")); err != nil {
		t.Fatalf("data dir changed: %v", err)
	}
}

// /dev/shm is a tmpfs: a backup dir there is on another filesystem.
func TestMoveAsideCrossDevice(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "repair-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	data := filepath.Join(t.TempDir(), "etcd")
	if sameFS(t, filepath.Dir(data), shm) {
		t.Skip("the temp dir and /dev/shm are one filesystem")
	}
	makeDataDir(t, data)
	dest, err := MoveAside(data, filepath.Join(shm, "backups"), t0)
	if !errors.Is(err, syscall.EXDEV) || dest != "" {
		t.Fatalf("MoveAside across filesystems = %q, %v; want EXDEV", dest, err)
	}
	if !strings.Contains(err.Error(), "must be on the data dir's own filesystem") {
		t.Errorf("error does not explain the fix: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "member", "wal", "0.wal")); err != nil {
		t.Fatalf("data dir was touched: %v", err)
	}
	if backups, _ := ListBackups(filepath.Join(shm, "backups")); len(backups) != 0 {
		t.Fatalf("something was copied: %v", backups)
	}
}

func sameFS(t *testing.T, a, b string) bool {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		t.Fatal("stat")
	}
	return sa.Dev == sb.Dev
}

func TestListBackups(t *testing.T) {
	root := t.TempDir()
	backups := filepath.Join(root, "b")
	if list, err := ListBackups(backups); list != nil || err != nil {
		t.Fatalf("missing dir: %v, %v", list, err)
	}
	var want []string
	for i, at := range []time.Time{t0, t0.Add(48 * time.Hour), t0.Add(time.Second)} {
		data := filepath.Join(root, "etcd")
		makeDataDir(t, data)
		dest, err := MoveAside(data, backups, at)
		if err != nil {
			t.Fatal(i, err)
		}
		want = append(want, dest)
	}
	os.WriteFile(filepath.Join(backups, "README"), nil, 0o600)
	os.Mkdir(filepath.Join(backups, "2026-13-99T00-00-00.000Z-bad"), 0o700)

	got, err := ListBackups(backups)
	if err != nil {
		t.Fatal(err)
	}
	newestFirst := []string{want[1], want[2], want[0]}
	if strings.Join(got, "\n") != strings.Join(newestFirst, "\n") {
		t.Fatalf("ListBackups =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(newestFirst, "\n"))
	}
}

func TestFreeBytes(t *testing.T) {
	dir := t.TempDir()
	free, err := FreeBytes(dir)
	if err != nil || free == 0 {
		t.Fatalf("FreeBytes(%s) = %d, %v", dir, free, err)
	}
	// A path that does not exist yet is on its nearest ancestor's filesystem.
	later, err := FreeBytes(filepath.Join(dir, "not", "yet"))
	if err != nil || later == 0 {
		t.Fatalf("FreeBytes of a future path = %d, %v", later, err)
	}
	if _, err := FreeBytes(""); err != nil {
		t.Fatalf("FreeBytes(\"\") (the working dir): %v", err)
	}
}

func TestRateLimited(t *testing.T) {
	now := t0
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tt := range []struct {
		name     string
		attempts []time.Time
		max      int
		want     bool
	}{
		{"none yet", nil, 3, false},
		{"two of three", []time.Time{ago(time.Minute), ago(59 * time.Minute)}, 3, false},
		{"three in the hour", []time.Time{ago(time.Minute), ago(2 * time.Minute), ago(59 * time.Minute)}, 3, true},
		{"old ones expire", []time.Time{ago(time.Minute), ago(61 * time.Minute), ago(2 * time.Hour)}, 2, false},
		{"exactly an hour ago has expired", []time.Time{ago(time.Hour)}, 1, false},
		{"future attempts count (clock stepped back)", []time.Time{now.Add(time.Hour)}, 1, true},
		{"zero allows none", nil, 0, true},
	} {
		if got := RateLimited(tt.attempts, now, tt.max); got != tt.want {
			t.Errorf("%s: RateLimited = %v, want %v", tt.name, got, tt.want)
		}
	}
}
