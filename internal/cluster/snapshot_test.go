package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSaveSnapshot downloads a snapshot into a new dir: the file is all
// of it, private, and no temp file is left next to it.
func TestSaveSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ep := startEtcd(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := filepath.Join(t.TempDir(), "snapshots")
	path := filepath.Join(dir, "snap.db")
	n, err := c.SaveSnapshot(context.Background(), ep, path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || st.Size() != n {
		t.Errorf("SaveSnapshot returned %d bytes, the file has %d", n, st.Size())
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only snap.db", dir, len(entries))
	}
}
