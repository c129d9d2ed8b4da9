package cluster

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// etcd 3.7's /metrics, cut to the lines around the two histograms.
const metricsText = `# HELP etcd_disk_backend_commit_duration_seconds The latency distributions of commit called by backend.
# TYPE etcd_disk_backend_commit_duration_seconds histogram
etcd_disk_backend_commit_duration_seconds_bucket{le="0.001"} 5
etcd_disk_backend_commit_duration_seconds_bucket{le="0.002"} 9
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} 10
etcd_disk_backend_commit_duration_seconds_sum 0.0213
etcd_disk_backend_commit_duration_seconds_count 10
# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 40
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 42
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 42
etcd_disk_wal_fsync_duration_seconds_sum 0.0344
etcd_disk_wal_fsync_duration_seconds_count 42
etcd_disk_wal_write_bytes_total 123456
`

func TestParseHistograms(t *testing.T) {
	hs, err := parseHistograms(strings.NewReader(metricsText), walFsyncMetric, backendCommitMetric)
	if err != nil {
		t.Fatal(err)
	}
	wal, commit := hs[walFsyncMetric], hs[backendCommitMetric]
	if wal.Count != 42 || len(wal.Bounds) != 3 || !math.IsInf(wal.Bounds[2], 1) || wal.Counts[1] != 42 {
		t.Errorf("wal fsync: %+v", wal)
	}
	if commit.Count != 10 || commit.Counts[0] != 5 {
		t.Errorf("backend commit: %+v", commit)
	}
	if _, err := parseHistograms(strings.NewReader(`etcd_disk_wal_fsync_duration_seconds_bucket{le="x"} 1`+"\n"), walFsyncMetric); err == nil {
		t.Error("a bad bound parsed")
	}
}

// dialOne starts an etcd and dials it (skipped under -short).
func dialOne(t *testing.T) (string, *Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ep, _ := testetcd.Start(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return ep, c
}

// TestDiskHistograms reads a real etcd's histograms: every put is a WAL
// fsync.
func TestDiskHistograms(t *testing.T) {
	ep, c := dialOne(t)
	ctx := context.Background()
	before, _, err := c.DiskHistograms(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("k%d", i), "v")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	wal, commit, err := c.DiskHistograms(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if d := wal.Since(before); d.Count < 20 {
		t.Errorf("%d WAL fsyncs over 20 puts", d.Count)
	}
	if len(commit.Bounds) == 0 {
		t.Error("no backend commit histogram")
	}
	if _, _, err := c.DiskHistograms(ctx, "http://127.0.0.1:1"); err == nil {
		t.Error("metrics of nothing listening read")
	}
}

// TestLeaderMoved: the agents' last leader move is read back while its
// lease lasts.
func TestLeaderMoved(t *testing.T) {
	_, c := dialOne(t)
	ctx := context.Background()
	if m, err := c.GetLeaderMoved(ctx, "t"); err != nil || m != nil {
		t.Fatalf("before any move: %+v, %v", m, err)
	}
	want := model.LeaderMoved{By: "node1", From: 1, To: 2, Why: "a restart", At: time.Now().UTC().Truncate(time.Second)}
	if err := c.PutLeaderMoved(ctx, "t", want); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetLeaderMoved(ctx, "t")
	if err != nil || got == nil || *got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	cli, _ := c.conn()
	resp, err := cli.Get(ctx, LeaderMovedKey("t"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the key: %v %v", resp, err)
	}
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != int64(model.LeaderMoveQuiet/time.Second) {
		t.Errorf("its lease: %+v, %v; want %s", ttl, err, model.LeaderMoveQuiet)
	}
}
