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

// TestLockCheckAfterLeaseRevoked: the server dropped the lock's lease
// (revoked here; expired after a pause of the holder, in life). The
// holder's client may still say Held() for a while; Check, asked of the
// cluster, refuses at once, and Kept says the lease is gone (F11 of the
// 2026-12-01 review).
func TestLockCheckAfterLeaseRevoked(t *testing.T) {
	ctx := context.Background()
	ep, _, l := heldLock(t, "fence")
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check of a lock just taken: %v", err)
	}
	if kept, err := l.Kept(ctx); !kept || err != nil {
		t.Fatalf("Kept of a lock just taken: %v %v", kept, err)
	}
	b, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cli, err := b.conn()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, l.Lease()); err != nil {
		t.Fatal(err)
	}
	held := l.Held()
	if err := l.Check(ctx); !errors.Is(err, ErrLockLost) {
		t.Errorf("Check after the lease was revoked: %v, want ErrLockLost", err)
	}
	if kept, err := l.Kept(ctx); kept || err != nil {
		t.Errorf("Kept after the lease was revoked: %v %v, want false", kept, err)
	}
	t.Logf("right after the revoke, Held() said %v", held)
	// Another agent's lock is a new key: the first one's Check keeps
	// refusing.
	l2, err := b.TryLock(ctx, "fence")
	if err != nil {
		t.Fatalf("lock not free after the revoke: %v", err)
	}
	defer func() { _ = l2.Unlock(ctx) }()
	if err := l.Check(ctx); !errors.Is(err, ErrLockLost) {
		t.Errorf("Check while another agent holds the lock: %v", err)
	}
	if err := l2.Check(ctx); err != nil {
		t.Errorf("the new holder's Check: %v", err)
	}
}

// TestLockCheckWantsTimeLeft: a lease that has less time left than one
// call may take is not enough to act on.
func TestLockCheckWantsTimeLeft(t *testing.T) {
	ctx := context.Background()
	_, _, l := heldLock(t, "short")
	// Stop the keepalive: the lease runs down from LockTTL.
	l.session.Orphan()
	deadline := time.Now().Add(3 * LockTTL * time.Second)
	for {
		err := l.Check(ctx)
		if errors.Is(err, ErrLockLost) {
			if ttl, terr := l.session.Client().TimeToLive(ctx, l.Lease()); terr == nil && ttl.TTL > 0 {
				t.Logf("refused with %d s left: %v", ttl.TTL, err)
			}
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Check: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFenceAfterAPause: an agent that pauses between the fence and its
// membership call (a GC pause, a stopped VM) longer than one call's
// deadline makes no change: the fenced context expired before the lock
// could.
func TestFenceAfterAPause(t *testing.T) {
	ctx := context.Background()
	_, a, l := heldLock(t, "pause")
	defer func() { _ = l.Unlock(ctx) }()
	fenced, cancel, err := l.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if d, ok := fenced.Deadline(); !ok || time.Until(d) > CallTimeout {
		t.Fatalf("fenced context's deadline %v: not within one call", d)
	}
	<-fenced.Done() // the pause
	if _, _, err := a.AddLearner(fenced, []string{"http://127.0.0.9:2380"}); err == nil {
		t.Fatal("a learner was added with a fence that had expired")
	}
	_, members, err := a.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 {
		t.Errorf("%d members after an expired fence, want 1", len(members))
	}
}

// heldLock starts an etcd, dials it and takes the lock as holder: the
// endpoint, the holder's client (closed at the end) and its lock.
func heldLock(t *testing.T, holder string) (string, *Client, *Lock) {
	t.Helper()
	ep := startEtcd(t)
	a, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	l, err := a.TryLock(context.Background(), holder)
	if err != nil {
		t.Fatal(err)
	}
	return ep, a, l
}

// TestResumeLock: a second client (the new process after an exec) takes
// the lock back on the lease of the first, which stops keeping it alive
// without revoking it; no other agent can take it meanwhile; and once the
// lease is gone, resuming says so.
func TestResumeLock(t *testing.T) {
	ep, _, l := heldLock(t, "c1")
	lease := l.Lease()
	l.session.Orphan() // the old process ends: no keepalive, no revoke

	b, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	r, err := b.ResumeLock(ctx, "c1", lease)
	if err != nil {
		t.Fatalf("resume the lock on its live lease: %v", err)
	}
	if err := r.Check(ctx); err != nil {
		t.Fatalf("the resumed lock does not check: %v", err)
	}
	other, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.TryLock(ctx, "c1"); !errors.Is(err, ErrLocked) {
		t.Fatalf("another agent while the lock is resumed: %v, want ErrLocked", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ResumeLock(ctx, "c1", lease); !errors.Is(err, ErrLockLost) {
		t.Fatalf("resume on a revoked lease: %v, want ErrLockLost", err)
	}
}

// TestUnlockClosesTheSessionsClient: a lock session runs on a client of
// its own, closed with the lock, so that no keepalive stream outlives it
// (an open stream makes the etcd it reaches wait out its graceful stop,
// 7 s, whenever it stops: every rollout restart after an agent's first
// lock paid that), and the agent's main client stays open.
func TestUnlockClosesTheSessionsClient(t *testing.T) {
	ep := startEtcd(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	main, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"taken", "resumed"} {
		l, err := c.TryLock(context.Background(), "own-client")
		if err != nil {
			t.Fatal(err)
		}
		if how == "resumed" {
			lease := l.Lease()
			l.session.Orphan()
			c.closeLockConn(l.session.Client())
			if l, err = c.ResumeLock(context.Background(), "own-client", lease); err != nil {
				t.Fatal(err)
			}
		}
		lockCli := l.session.Client()
		if lockCli == main {
			t.Fatalf("%s: the lock session runs on the agent's main client", how)
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if lockCli.Ctx().Err() == nil {
			t.Errorf("%s: the lock session's client is still open after Unlock", how)
		}
		if main.Ctx().Err() != nil {
			t.Fatalf("%s: Unlock closed the main client", how)
		}
	}
	// ErrLocked closes the failed attempt's client too (and the holder's
	// lock stays).
	holder, err := c.TryLock(context.Background(), "own-client")
	if err != nil {
		t.Fatal(err)
	}
	other, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.TryLock(context.Background(), "own-client"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	if err := holder.Check(context.Background()); err != nil {
		t.Fatalf("the holder's lock after another's failed attempt: %v", err)
	}
	_ = holder.Unlock(context.Background())
}
