package cluster

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd runs a real one-member etcd (the embedded server) on loopback
// and returns its client URL. It skips the test under -short: starting
// etcd is what makes a test slow.
func startEtcd(t *testing.T) string {
	t.Helper()
	client, _ := startEtcdURLs(t)
	return client
}

// startEtcdURLs is startEtcd returning the client and the peer URL.
func startEtcdURLs(t *testing.T) (string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	peer, client := freeURL(t), freeURL(t)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not become ready")
	}
	return client.String(), peer.String()
}

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// TestLockIsExclusive races many agents' clients on the cluster lock:
// never more than one holds it, and every one eventually gets it.
func TestLockIsExclusive(t *testing.T) {
	ep := startEtcd(t)
	const agents = 6
	var holders, maxHolders, got atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < agents; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := Dial([]string{ep}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				l, err := c.TryLock(context.Background(), "race")
				if errors.Is(err, ErrLocked) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				for {
					m := maxHolders.Load()
					if n <= m || maxHolders.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond) // the "membership change"
				holders.Add(-1)
				if err := l.Unlock(context.Background()); err != nil {
					t.Error(err)
				}
				got.Add(1)
				return
			}
			t.Errorf("agent %d never got the lock", i)
		}(i)
	}
	wg.Wait()
	if m := maxHolders.Load(); m != 1 {
		t.Fatalf("%d agents held the lock at once", m)
	}
	if g := got.Load(); g != agents {
		t.Fatalf("%d of %d agents got the lock", g, agents)
	}
}

// TestLockExpiresWithItsHolder: a holder that dies without unlocking
// (its lease is no longer kept alive) loses the lock within the TTL.
func TestLockExpiresWithItsHolder(t *testing.T) {
	ep := startEtcd(t)
	a, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryLock(context.Background(), "crash"); err != nil {
		t.Fatal(err)
	}
	a.Close() // the "crash": keepalives stop, the lease runs out
	b, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	deadline := time.Now().Add(3 * LockTTL * time.Second)
	for {
		l, err := b.TryLock(context.Background(), "crash")
		if err == nil {
			_ = l.Unlock(context.Background())
			return
		}
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("lock of a dead holder not released: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
