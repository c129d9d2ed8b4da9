package backup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// plant is what another local user (uid 65534) runs in a backup dir it
// can write to: $KEEP snapshots with sidecars that claim to be member a's
// scheduled, verified snapshots of cluster c1 (its real cluster ID, which
// is no secret), with their true sha256 and huge sequence numbers.
const plant = `
cd "$DIR" || exit 1
i=1
while [ $i -le $KEEP ]; do
  f="c1-2099010${i}T000000Z-rev99999${i}.db"
  echo "forged $i" > "$f"
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  cat > "$f.json" <<JSON
{"writer":"etcdkeeper","by":"schedule","cluster":"c1","member":"a","file":"$f","seq":$((1000000000000 + i)),
 "takenAt":"2099-01-0${i}T00:00:00Z","source":{"name":"a","clusterID":"$CLUSTER_ID","role":"leader"},
 "sha256":"$sum","size":9,"verified":true,"verification":{"revision":99999${i},"totalKey":1,"integrity":"none"}}
JSON
  i=$((i + 1))
done
`

// TestForgedSnapshotsNeitherKeptNorRecommended: a backup.dir another user
// can write to (chmod 1777), where uid 65534 plants backup.keep forged
// pairs with huge sequence numbers. The agent's retention must not delete
// its real snapshots because of them, and the newest verified snapshot
// must not be a forged one: the dir is refused (no snapshot, no pruning,
// no recommendation); once its mode is fixed, the planted files (another
// user's) count for nothing and are never deleted.
func TestForgedSnapshotsNeitherKeptNorRecommended(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant files as uid 65534")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
	ep, _ := testetcd.Start(t)
	fill(t, ep, 20, 10)
	base := t.TempDir()
	// uid 65534 must reach the dir, as it could reach a real backup.dir.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "backups")
	const keep = 3
	var real []Entry
	for i := range keep {
		put(t, ep, fmt.Sprintf("/between/%d", i))
		e, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}).Take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		real = append(real, e)
	}
	id := real[0].Sidecar.Source.ClusterID
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", plant)
	cmd.Env = append(os.Environ(), "DIR="+dir, fmt.Sprintf("KEEP=%d", keep), "CLUSTER_ID="+id)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("planting as uid 65534: %v: %s", err, out)
	}
	planted, _ := filepath.Glob(filepath.Join(dir, "c1-2099*"))
	if len(planted) != 2*keep {
		t.Fatalf("planted %q", planted)
	}

	check := func(when string) {
		t.Helper()
		removed, err := prune(dir, id, keep)
		t.Logf("%s: retention: removed %q, %v", when, removed, err)
		for _, e := range real {
			if _, err := os.Stat(e.Path()); err != nil {
				t.Errorf("%s: retention deleted the real snapshot %s", when, e.File)
			}
		}
		for _, p := range planted {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: retention deleted %s, another user's file", when, filepath.Base(p))
			}
		}
		entries, err := List(dir, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := newest(entries, id); ok && strings.Contains(e.File, "c1-2099") {
			t.Errorf("%s: the newest verified snapshot is the forged %s", when, e.File)
		}
	}
	check("dir 1777")
	if _, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}).Take(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("Take into a 1777 dir = %v, want it refused", err)
	}
	// The mode fixed; the planted files stay, owned by uid 65534.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	check("dir 0700, planted files left")
	entries, err := List(dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := newest(entries, id); !ok || e.File != real[keep-1].File {
		t.Errorf("newest verified = %s, %v; want the newest real one %s", e.File, ok, real[keep-1].File)
	}
}

// TestTwinClustersShareADir: two clusters of the same name and member
// names (staging and prod both "c1") keep their snapshots in one shared
// dir. Neither's retention deletes the other's, and each one's newest
// verified snapshot is its own.
func TestTwinClustersShareADir(t *testing.T) {
	epX, _ := testetcd.Start(t)
	epY, _ := testetcd.Start(t)
	fill(t, epX, 10, 10)
	fill(t, epY, 30, 10) // other revisions: other file names
	dir := filepath.Join(t.TempDir(), "shared")
	const keep = 2
	taken := map[string][]string{}
	var ids = map[string]string{}
	for i := range 3 {
		for _, ep := range []string{epX, epY} {
			put(t, ep, fmt.Sprintf("/between/%d", i))
			e, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}).Take(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ids[ep] = e.Sidecar.Source.ClusterID
			taken[ep] = append(taken[ep], e.File)
			if _, err := prune(dir, e.Sidecar.Source.ClusterID, keep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ids[epX] == ids[epY] {
		t.Fatalf("both clusters have ID %s", ids[epX])
	}
	entries, err := List(dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.File)
	}
	for _, ep := range []string{epX, epY} {
		for _, f := range taken[ep][1:] { // the newest keep of each
			if !slices.Contains(left, f) {
				t.Errorf("cluster %s's snapshot %s was deleted (left: %q)", ids[ep], f, left)
			}
		}
		if e, ok := newest(entries, ids[ep]); !ok || e.File != taken[ep][2] {
			t.Errorf("newest verified for cluster %s = %s, %v; want its own %s", ids[ep], e.File, ok, taken[ep][2])
		}
	}
}

func put(t *testing.T, ep, key string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, key, "v"); err != nil {
		t.Fatal(err)
	}
}

// prune and newest are the agent's retention and recommendation for
// member a of cluster c1 with the cluster ID id.
func prune(dir, id string, keep int) ([]string, error) {
	return RemovePruned(dir, Owner{Cluster: "c1", Member: "a", ClusterID: id}, keep)
}

func newest(entries []Entry, id string) (Entry, bool) { return NewestVerified(entries, id) }
