package dbfile

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// member is one etcd of the test's cluster, started and stopped by hand.
type member struct {
	name, dir      string
	peer, client   url.URL
	e              *embed.Etcd
	initialCluster string
}

func (m *member) start(t *testing.T) {
	t.Helper()
	if err := m.launch(); err != nil {
		t.Fatal(err)
	}
}

// launch starts the member's etcd and waits until it serves.
func (m *member) launch() error {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.name, m.dir
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
	cfg.InitialCluster = m.initialCluster
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	m.e = e
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s did not become ready", m.name)
	}
}

func (m *member) stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

func threeMembers(t *testing.T) []*member {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	var ms []*member
	var initial []string
	for i := range 3 {
		m := &member{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), peer: testetcd.FreeURL(t), client: testetcd.FreeURL(t)}
		initial = append(initial, m.name+"="+m.peer.String())
		ms = append(ms, m)
	}
	for _, m := range ms {
		m.initialCluster = strings.Join(initial, ",")
		t.Cleanup(m.stop)
	}
	errs := make(chan error)
	for _, m := range ms {
		go func() { errs <- m.launch() }()
	}
	for range ms {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return ms
}

func clientOf(t *testing.T, eps ...string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fragment writes n values of 64 KiB, deletes them and compacts: their
// pages are free in every member's db, and the file keeps its size.
func fragment(t *testing.T, cli *clientv3.Client, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	val := strings.Repeat("x", 64<<10)
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/frag/%04d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// bbolt frees the compacted pages at its next commit: a few writes.
	for i := range 5 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/after/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// waitFor polls cond until it says "" or the generous deadline passes.
func waitFor(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	why := ""
	for time.Now().Before(deadline) {
		if why = cond(); why == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s", what, why)
}

// TestDefragmentStoppedFollower: a follower stopped gracefully, its db
// rewritten offline and started again rejoins as the same member with
// the same data, catches up with the writes made meanwhile, and its db
// file has given its free pages back.
func TestDefragmentStoppedFollower(t *testing.T) {
	ms := threeMembers(t)
	cli := clientOf(t, ms[0].client.String(), ms[1].client.String(), ms[2].client.String())
	fragment(t, cli, 160) // 10 MiB
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A follower: the leader's stop would cost an election.
	var f *member
	for _, m := range ms {
		if l := m.e.Server.Leader(); l != 0 && l != m.e.Server.MemberID() {
			f = m
		}
	}
	if f == nil {
		t.Fatal("no follower")
	}
	id := f.e.Server.MemberID()
	waitFor(t, "the follower's db more than half free", func() string {
		st, err := cli.Status(ctx, f.client.String())
		if err != nil {
			return err.Error()
		}
		if st.DbSize < 8<<20 || st.DbSizeInUse*2 > st.DbSize {
			return fmt.Sprintf("db %d, in use %d", st.DbSize, st.DbSizeInUse)
		}
		return ""
	})
	f.stop()
	if _, err := cli.Put(ctx, "/while-down", "kept"); err != nil {
		t.Fatal(err)
	}
	r, err := Defragment(zaptest.NewLogger(t), f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.After*2 > r.Before || r.InUse > r.After {
		t.Fatalf("the db was not rewritten without its free pages: %+v", r)
	}
	if temps, _ := filepath.Glob(filepath.Join(f.dir, "member", "snap", "db.tmp*")); len(temps) > 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
	f.start(t)
	if got := f.e.Server.MemberID(); got != id {
		t.Fatalf("the member came back as %x, was %x", got, id)
	}
	fcli := clientOf(t, f.client.String())
	waitFor(t, "the follower caught up", func() string {
		resp, err := fcli.Get(ctx, "/while-down")
		if err != nil {
			return err.Error()
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept" {
			return fmt.Sprintf("%v", resp.Kvs)
		}
		return ""
	})
	st, err := fcli.Status(ctx, f.client.String())
	if err != nil {
		t.Fatal(err)
	}
	if st.DbSize*2 > r.Before {
		t.Fatalf("db %d after the restart, %d before the rewrite", st.DbSize, r.Before)
	}
	// The same data as the others: every member's hash of the keyspace
	// at one revision.
	rev := st.Header.Revision
	var hashes []uint32
	for _, m := range ms {
		h, err := cli.HashKV(ctx, m.client.String(), rev)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h.Hash)
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("members' hashes at revision %d differ: %v", rev, hashes)
	}
}

// TestDefragmentRefuses: no db, no new one; a db an etcd runs on is left
// alone (its file lock), with an error rather than a wait.
func TestDefragmentRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := Defragment(zaptest.NewLogger(t), dir); err == nil {
		t.Fatal("an empty data dir was defragmented")
	}
	if _, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); !os.IsNotExist(err) {
		t.Fatalf("a db was created: %v", err)
	}
	ms := threeMembers(t)
	if _, err := Defragment(zap.NewNop(), ms[0].dir); err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("the db of a running etcd was defragmented: %v", err)
	}
}
