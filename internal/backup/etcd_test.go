package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// fill writes n keys of size bytes each, overwrites every tenth and
// deletes every twentieth (history and tombstones, as a real keyspace
// has), and returns the live key count and the last revision.
func fill(t *testing.T, ep string, n, size int) (int, int64) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	val := strings.Repeat("v", size)
	var rev int64
	live := 0
	for i := range n {
		key := fmt.Sprintf("/k/%06d", i)
		r, err := cli.Put(ctx, key, val)
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
		live++
		if i%10 == 0 {
			if r, err = cli.Put(ctx, key, "again"); err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		}
		if i%20 == 0 {
			d, err := cli.Delete(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			rev = d.Header.Revision
			live--
		}
	}
	return live, rev
}

func dial(t *testing.T, ep string) *cluster.Client {
	t.Helper()
	c, err := cluster.Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestTakeVerifyRestore takes a snapshot of a real etcd (~1 MB), checks
// what the verification found against what was written, restores it into
// a throwaway etcd and compares; a damaged copy fails verification.
func TestTakeVerifyRestore(t *testing.T) {
	ep, _ := testetcd.Start(t)
	live, rev := fill(t, ep, 1000, 1000)
	dir := filepath.Join(t.TempDir(), "backups")
	tk := Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: BySchedule}
	start := time.Now()
	e, err := tk.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("take+verify of %d bytes (%d keys): %v", e.Size, live, time.Since(start).Round(time.Millisecond))
	v := e.Sidecar.Verification
	if v.TotalKey != live || v.Revision != rev || e.Revision != rev || v.Integrity != "ok" || v.Error != "" {
		t.Errorf("verification = %+v, want %d keys at revision %d, integrity ok", v, live, rev)
	}
	if _, ok := parseName("c1", e.File); !ok || !strings.HasSuffix(e.File, fmt.Sprintf("-rev%d.db", rev)) {
		t.Errorf("file %q does not follow <cluster>-<UTC time>-rev<revision>.db", e.File)
	}
	if e.Sidecar.Source.Role != "leader" || e.Sidecar.Seq != 1 {
		t.Errorf("sidecar = %+v, want the only member (the leader) as source, seq 1", e.Sidecar)
	}
	names := dirNames(t, dir)
	if want := []string{e.File, SidecarName(e.File), e.File + sumSuffix}; !slices.Equal(names, want) {
		t.Errorf("backup dir holds %q, want only %q (the snapshot, its sidecar and its sum cache; no temporary file left)", names, want)
	}
	listed, err := List(dir, "c1")
	if err != nil || len(listed) != 1 || !listed[0].Verified() || listed[0].Sidecar.SHA256 != e.Sidecar.SHA256 {
		t.Fatalf("List = %+v, %v", listed, err)
	}

	start = time.Now()
	rc := CheckRestore(context.Background(), listed[0], Keys{})
	t.Logf("restore check: %v", time.Since(start).Round(time.Millisecond))
	if !rc.OK || rc.Keys != int64(live) || rc.Revision != rev || rc.KVHash != v.KVHash {
		t.Errorf("restore check = %+v, want %d keys at revision %d, key bucket hash %08x", rc, live, rev, v.KVHash)
	}
	if sc, err := readSidecar(filepath.Join(dir, SidecarName(e.File))); err != nil || sc.RestoreCheck == nil || !sc.RestoreCheck.OK {
		t.Errorf("sidecar after the restore check: %+v, %v", sc, err)
	}
	if names := dirNames(t, dir); len(names) != 3 {
		t.Errorf("the throwaway restore dir was left: %q", names)
	}

	// One flipped byte in the db: etcd's appended sha256 no longer
	// matches; a restore of it would fail too.
	b, err := os.ReadFile(e.Path())
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Verify(damaged); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Verify(damaged) = %v, want an integrity error", err)
	}
	// Without the appended sha256 (a copied db): the bbolt check still
	// runs, and a truncated db fails it.
	if err := os.WriteFile(damaged, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Verify(damaged); err == nil {
		t.Error("Verify(truncated) passed")
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	return names
}

// TestScheduleKeepsThree runs the schedule with keep: 3 and interval: 3s
// against a real etcd, with the wall clock set back a day after the
// second snapshot. It holds at most keep snapshots of its own (one more
// only between a snapshot and its retention), keeps the newest by
// sequence, not by the clock, restore-checks one, and never touches what
// it did not write: a snapshot saved by hand, another member's, one
// without a sidecar, and any other file.
func TestScheduleKeepsThree(t *testing.T) {
	ep, peer := testetcd.Start(t)
	fill(t, ep, 100, 100)
	root := t.TempDir()
	sp, err := spec.Parse(fmt.Appendf(nil, `cluster: {name: c1}
members:
  - {name: a, peerURLs: [%s], clientURLs: [%s]}
agent:
  stateDir: state/{name}
backup:
  interval: 3s
  keep: 3
`, peer, ep), filepath.Join(root, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	self := sp.Members[0]
	dir := self.SnapshotDir

	// What is there before: a snapshot saved by hand, one of member b
	// (same dir, say a shared mount), a snapshot without a sidecar (a
	// crash before it was written) and another file.
	hand, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "a", Dir: dir, By: ByHand}).Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // another name
	other, err := (&Taker{Client: dial(t, ep), Cluster: "c1", Member: "b", Dir: dir, By: BySchedule}).Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(hand.Path())
	unverified := FileName("c1", time.Now().Add(-time.Hour), 1)
	for name, data := range map[string][]byte{unverified: b, "notes.txt": []byte("mine")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	untouched := []string{hand.File, SidecarName(hand.File), other.File, SidecarName(other.File), unverified, "notes.txt"}

	var takes atomic.Int32
	m := metrics.New()
	s := NewScheduler(Config{
		Spec:    func() (*spec.Spec, spec.Member) { return sp, self },
		Metrics: m.Backup,
		Now: func() time.Time {
			if takes.Add(1) > 2 {
				return time.Now().Add(-24 * time.Hour) // the clock set back a day
			}
			return time.Now()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	seen := map[string]int64{} // own scheduled snapshots -> seq
	deadline := time.Now().Add(60 * time.Second)
	// Six seen, and the sixth's retention run: a snapshot appears before
	// its retention removes the oldest, and a scheduler stopped in between
	// would hold four (the one more of that moment).
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		own := ownScheduled(t, dir)
		for f, seq := range own {
			seen[f] = seq
		}
		if len(own) > 4 {
			t.Fatalf("%d snapshots of its own at once: %v", len(own), own)
		}
		if len(seen) >= 6 && len(own) <= 3 {
			break
		}
	}
	cancel()
	<-done
	for f, seq := range ownScheduled(t, dir) { // one taken since the last look
		seen[f] = seq
	}
	if len(seen) < 6 {
		t.Fatalf("saw %d scheduled snapshots in 60 s, want 6 (interval 3s)", len(seen))
	}
	own := ownScheduled(t, dir)
	var newest []string
	for f := range seen {
		newest = append(newest, f)
	}
	slices.SortFunc(newest, func(a, b string) int { return int(seen[b] - seen[a]) })
	newest = newest[:3]
	slices.Sort(newest)
	var kept []string
	for f := range own {
		kept = append(kept, f)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, newest) {
		t.Errorf("kept %q, want the three newest by sequence %q (the clock went back a day in between)", kept, newest)
	}
	names := dirNames(t, dir)
	for _, f := range names {
		if snap, ok := strings.CutSuffix(f, sumSuffix); ok && !slices.Contains(names, snap) {
			t.Errorf("%s was left by retention without its snapshot", f)
		}
	}
	for _, f := range untouched {
		if !slices.Contains(names, f) {
			t.Errorf("%s was deleted: it is not this agent's own verified snapshot", f)
		}
	}
	st := s.State()
	if st.LastRestoreCheck == nil || !st.LastRestoreCheck.OK || st.FailuresInARow != 0 {
		t.Errorf("state = %+v, want a passed restore check and no failures", st)
	}
	if got := testutil.ToFloat64(m.Backup.Removed); got < 3 {
		t.Errorf("removed_total = %v, want at least 3", got)
	}
	if got := testutil.ToFloat64(m.Backup.Interval); got != 3 {
		t.Errorf("interval_seconds = %v, want 3", got)
	}
	for _, stage := range []string{"snapshot", "verify", "retention", "restore-check"} {
		if got := testutil.ToFloat64(m.Backup.Failures.WithLabelValues(stage)); got != 0 {
			t.Errorf("failures_total{stage=%s} = %v", stage, got)
		}
	}
	if got := testutil.ToFloat64(m.Backup.LastSuccess); time.Since(time.Unix(int64(got), 0)) > 25*time.Hour {
		t.Errorf("last_success_timestamp_seconds = %v", got)
	}
}

// ownScheduled maps this test agent's (member a) scheduled snapshots in
// dir to their sequence numbers.
func ownScheduled(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	entries, err := List(dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range entries {
		if e.Sidecar != nil && e.Sidecar.By == BySchedule && e.Sidecar.Member == "a" {
			out[e.File] = e.Sidecar.Seq
		}
	}
	return out
}
