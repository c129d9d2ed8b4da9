package cluster

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockTTL is the lease TTL in seconds behind the cluster-wide lock: the
// lock of an agent that crashed expires this long after its last
// keepalive.
const LockTTL = 10

// ErrLocked means another agent holds the cluster-wide lock.
var ErrLocked = errors.New("another agent holds the cluster lock")

// Lock is the cluster-wide lock that one agent holds while it changes
// membership or repairs its member: one actor at a time.
type Lock struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// LockKey is the lock's key prefix for a cluster.
func LockKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/lock" }

// TryLock takes the cluster-wide lock without waiting; ErrLocked when
// another agent holds it.
func (c *Client) TryLock(ctx context.Context, clusterName string) (*Lock, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	s, err := c.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock session: %w", err)
	}
	m := concurrency.NewMutex(s, LockKey(clusterName))
	if err := m.TryLock(ctx); err != nil {
		_ = s.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("take lock %s: %w", LockKey(clusterName), err)
	}
	return &Lock{session: s, mutex: m}, nil
}

// Held reports whether the lock's lease is still alive.
func (l *Lock) Held() bool {
	select {
	case <-l.session.Done():
		return false
	default:
		return true
	}
}

// Unlock releases the lock and revokes its lease.
func (l *Lock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	err := l.mutex.Unlock(ctx)
	if cerr := closeSession(l.session); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

// session opens a lease-backed session. The lease is granted with a
// deadline (concurrency.NewSession alone would wait forever on a cluster
// without quorum); its keepalive then runs until the session is closed.
func (c *Client) session(ctx context.Context) (*concurrency.Session, error) {
	gctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	lease, err := cli.Grant(gctx, LockTTL)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(LockTTL), concurrency.WithLease(lease.ID))
	if err != nil {
		return nil, fmt.Errorf("session on lease %x: %w", lease.ID, err)
	}
	return s, nil
}

// closeSession stops the keepalive and revokes the lease within
// CallTimeout (Session.Close would wait up to the whole TTL).
func closeSession(s *concurrency.Session) error {
	s.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	if _, err := s.Client().Revoke(ctx, s.Lease()); err != nil {
		return fmt.Errorf("revoke lease %x: %w", s.Lease(), err)
	}
	return nil
}
