package cluster

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// startEtcd runs a real one-member etcd and returns its client URL (see
// testetcd.Start).
func startEtcd(t *testing.T) string {
	t.Helper()
	client, _ := testetcd.Start(t)
	return client
}

// startEtcdURLs is startEtcd returning the client and the peer URL.
func startEtcdURLs(t *testing.T) (string, string) {
	t.Helper()
	return testetcd.Start(t)
}

func freeURL(t *testing.T) url.URL {
	t.Helper()
	return testetcd.FreeURL(t)
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
