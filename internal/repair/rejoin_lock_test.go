package repair

import (
	"context"
	"errors"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestRejoinLockLostDuringChange: a lease that ran out while the remove
// was under way cannot undo the remove: it is journaled, and said loudly.
func TestRejoinLockLostDuringChange(t *testing.T) {
	f := &fakeWorld{failOn: "lock-kept"}
	core, logs := observer.New(zapcore.ErrorLevel)
	r := newRejoin(f)
	r.Log = zap.New(core)
	_, err := r.Run(context.Background(), repairPlan)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.saved, StepRemove) {
		t.Errorf("the remove was not journaled: %v", f.saved)
	}
	if n := logs.FilterMessageSnippet("the cluster lock was lost during a membership change").Len(); n != 2 {
		t.Errorf("%d error lines about the lost lock, want one per change (remove, add)", n)
	}
}

// realLock is the agent's lock as a rejoin sees it.
type realLock struct{ l *cluster.Lock }

func (r realLock) Fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return r.l.Fence(ctx)
}
func (r realLock) Kept(ctx context.Context) (bool, error) { return r.l.Kept(ctx) }
func (r realLock) Release(context.Context)                {}

// TestRejoinRefusesWithRevokedLock: the lock's lease is gone on the server
// (revoked here; expired after a pause of the agent, in life) while the
// holder's client may still believe it holds the lock. The rejoin's add
// must not happen: another agent may hold the lock by now (F11 of the
// 2026-12-01 review).
func TestRejoinRefusesWithRevokedLock(t *testing.T) {
	ep, _ := testetcd.Start(t)
	ctx := context.Background()
	holder, err := cluster.Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.TryLock(ctx, "fence")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Revoke(ctx, lock.Lease()); err != nil {
		t.Fatal(err)
	}
	other, err := cluster.Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The other agent takes the lock: two holders, as far as the first
	// one's client knows.
	second, err := other.TryLock(ctx, "fence")
	if err != nil {
		t.Fatalf("the lock was not free after its lease was revoked: %v", err)
	}
	defer func() { _ = second.Unlock(ctx) }()
	t.Logf("after the revoke, the first holder's Held() says %v", lock.Held())

	f := &fakeWorld{}
	r := newRejoin(f)
	r.Cluster, r.Lock = holder, realLock{lock}
	_, err = r.Run(ctx, Plan{Reason: "joining", PeerURLs: []string{"http://127.0.0.9:2380"}})
	if !errors.Is(err, cluster.ErrLockLost) {
		t.Errorf("rejoin with a revoked lock: %v, want the lock lost", err)
	}
	_, members, err := holder.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 {
		t.Fatalf("a learner was added under a lock whose lease was revoked: %d members", len(members))
	}
}
