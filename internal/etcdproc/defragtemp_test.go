package etcdproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"
)

// TestRemoveDefragTemps: only the defragmentation's temporaries in
// member/snap go; the db, the snapshots, the WAL and a directory of that
// name stay.
func TestRemoveDefragTemps(t *testing.T) {
	data := t.TempDir()
	snap := filepath.Join(data, "member", "snap")
	wal := filepath.Join(data, "member", "wal")
	for _, d := range []string{snap, wal, filepath.Join(snap, "db.tmp.dir")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(snap, "db"), filepath.Join(snap, "db.tmp.1234567"), filepath.Join(snap, "db.tmp.89"),
		filepath.Join(snap, "0000000000000002-0000000000000010.snap"), filepath.Join(wal, "db.tmp.5")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveDefragTemps(zap.NewNop(), data); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range []string{snap, wal} {
		es, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			left = append(left, filepath.Base(d)+"/"+e.Name())
		}
	}
	want := []string{"snap/0000000000000002-0000000000000010.snap", "snap/db", "snap/db.tmp.dir", "wal/db.tmp.5"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	// A data dir that has no member yet is no error.
	if err := RemoveDefragTemps(zap.NewNop(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
