package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestRestoreCheckFailsWrongSnapshots: the offline restore check still
// fails a snapshot that is not what its sidecar says (another revision,
// key count or key bucket), one changed since it was verified, and one
// that cannot be restored.
func TestRestoreCheckFailsWrongSnapshots(t *testing.T) {
	ep, _ := testetcd.Start(t)
	_, rev := fill(t, ep, 300, 100)
	// A key on a lease (the store restores it with its lessor) and a
	// finished compaction, as a real keyspace has.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/leased", "v", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, rev-10, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "backups")
	good, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}).Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rc := CheckRestore(context.Background(), good, Keys{}); !rc.OK || rc.Keys != int64(good.Sidecar.Verification.TotalKey) {
		t.Fatalf("the good snapshot: %+v", rc)
	}
	data, err := os.ReadFile(good.Path())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// change edits the sidecar (and may rewrite the file).
		change func(t *testing.T, sc *Sidecar, path string)
		want   string
	}{
		{"another revision", func(_ *testing.T, sc *Sidecar, _ string) { sc.Verification.Revision++ }, "revision"},
		{"another key count", func(_ *testing.T, sc *Sidecar, _ string) { sc.Verification.TotalKey-- }, "keys"},
		{"another key bucket", func(_ *testing.T, sc *Sidecar, _ string) { sc.Verification.KVHash++ }, "key bucket hash"},
		{"changed since verified", func(t *testing.T, _ *Sidecar, path string) {
			b := append([]byte(nil), data...)
			b[len(b)/2] ^= 0xff
			writeFile(t, path, b)
		}, "sha256"},
		{"truncated, sha256 updated", func(t *testing.T, sc *Sidecar, path string) {
			writeFile(t, path, data[:len(data)/2])
			s, _ := fileSums(path)
			sc.SHA256 = s.SHA256
		}, "does not verify"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := good
			e.Dir = filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(e.Dir, 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, e.Path(), data)
			sc := *good.Sidecar
			tt.change(t, &sc, e.Path())
			e.Sidecar = &sc
			rc := CheckRestore(context.Background(), e, Keys{})
			if rc.OK || !strings.Contains(rc.Error, tt.want) {
				t.Errorf("case %d: restore check = %+v, want it to fail about %q", i, rc, tt.want)
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
