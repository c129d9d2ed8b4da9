package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestLockTakenUnderNoSpace: a lock taken before NOSPACE is still seen
// under it (the NOSPACE procedure's unlocked steps wait for its holder:
// G3), no new one can be taken then, and once it is given back the lock
// reads as free.
func TestLockTakenUnderNoSpace(t *testing.T) {
	ep, _ := testetcd.StartWith(t, func(cfg *embed.Config) { cfg.QuotaBackendBytes = 4 << 20 })
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if taken, err := c.LockTaken(ctx, "g3"); err != nil || taken {
		t.Fatalf("before anyone took it: taken %v, %v", taken, err)
	}
	l, err := c.TryLock(ctx, "g3")
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := c.conn()
	fillToNoSpace(ctx, t, cli)
	if taken, err := c.LockTaken(ctx, "g3"); err != nil || !taken {
		t.Fatalf("the lock taken before NOSPACE, read under it: taken %v, %v; want taken", taken, err)
	}
	other, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if l2, err := other.TryLock(ctx, "g4"); err == nil || errors.Is(err, ErrLocked) {
		if l2 != nil {
			_ = l2.Unlock(ctx)
		}
		t.Fatalf("a new lock under NOSPACE: %v; want etcd to refuse it", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if taken, err := c.LockTaken(ctx, "g3"); err != nil || taken {
		t.Fatalf("after the holder gave it back: taken %v, %v; want free", taken, err)
	}
}
