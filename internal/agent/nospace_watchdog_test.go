package agent

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestCompactFeedsWatchdog: the NOSPACE procedure's compaction is a call
// of up to cluster.CompactDeadline (two minutes; about a minute per
// million revisions), far longer than the loop's patience with one pass
// (WatchdogSec, 30 s). Unfed, systemd would kill the agent mid-call, and
// with it its etcd, the leader's (the parent-death signal). A real etcd
// compacting slowly (one revision per batch, 250 ms apart): pings go on
// while the call is inside its deadline.
func TestCompactFeedsWatchdog(t *testing.T) {
	client, peer := testetcd.StartWith(t, func(c *embed.Config) {
		c.CompactionBatchLimit, c.CompactionSleepInterval = 1, 250*time.Millisecond
	})
	dir := t.TempDir()
	s, err := spec.Parse([]byte(fmt.Sprintf(`cluster: {name: c}
members:
  - {name: default, peerURLs: [%s], clientURLs: [%s], dataDir: %s}
`, peer, client, filepath.Join(dir, "data"))), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "2000000")
	a, err := New(Config{Spec: s, Name: "default", Self: "etcdkeeper"})
	if err != nil {
		t.Fatal(err)
	}
	a.notify.Ready()
	if err := a.ensureClient(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 30 {
		if err := a.client.CheckPut(ctx, fmt.Sprintf("/k/%d", i%3), "v"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.client.Status(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	rev := st.Header.Revision
	pings := watchdogPings(conn)
	start := time.Now()
	if _, _, err := a.compact(ctx, reconcile.Action{Step: reconcile.Step{Kind: reconcile.StepCompact, Revision: rev}}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < 4*time.Second {
		t.Fatalf("the compaction took %s, not much longer than the watchdog interval (2s): proves nothing", took)
	}
	late := 0 // pings more than a watchdog interval after the start
	for len(pings) > 0 {
		if (<-pings).Sub(start) > 2500*time.Millisecond {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no watchdog ping during a compaction of %s: systemd would kill the agent (and its etcd) mid-call", took)
	}
}
