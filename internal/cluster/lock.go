package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
	c       *Client
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
		_ = c.closeSession(s)
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("take lock %s: %w", LockKey(clusterName), err)
	}
	return &Lock{c: c, session: s, mutex: m}, nil
}

// ErrLockLost means the cluster lock is no longer provably this agent's.
var ErrLockLost = errors.New("the cluster lock is no longer ours")

// callMargin is the least time the lock's lease must have left when Check
// passes: the membership call that follows is one call (CallTimeout, a
// deadline gRPC sends along, so etcd gives up on it after that too), and
// TimeToLive rounds down to whole seconds.
const callMargin = CallTimeout + time.Second

// Held reports whether the lock's lease is still alive as this client
// last heard: it can still say yes for about a second plus a round trip
// after the server expired the lease (the client learns it from the next
// keepalive answer, or from its own deadline, checked once a second).
// Good enough to skip a step; before a membership change, use Check.
func (l *Lock) Held() bool {
	select {
	case <-l.session.Done():
		return false
	default:
		return true
	}
}

// Check proves, linearizably, that the lock is still ours and will stay
// ours for the length of one call: its key still exists with the create
// revision we took it with (a key deleted with its lease and made again
// by another agent has a new one), and its lease has at least callMargin
// left on the leader. etcd's membership calls (MemberAdd, MemberRemove,
// MemberPromote, MemberUpdate, MoveLeader) cannot be made part of a txn,
// so this is the fence (see Fence): the call that follows carries a
// deadline shorter than the lease's time left, so it is proposed while the
// lock is still ours.
func (l *Lock) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	cli, key := l.session.Client(), l.mutex.Key()
	// The Get makes it a linearizable read: etcd answers a txn whose ops
	// are all serializable (none at all counts) from the local member,
	// which may lag or be cut off.
	resp, err := cli.Txn(ctx).If(l.mutex.IsOwner()).Then(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return fmt.Errorf("check the cluster lock %s: %w", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: its key %s is gone (lease %x expired or was revoked)", ErrLockLost, key, l.session.Lease())
	}
	ttl, err := cli.TimeToLive(ctx, l.session.Lease())
	if err != nil {
		return fmt.Errorf("check the cluster lock's lease %x: %w", l.session.Lease(), err)
	}
	if left := time.Duration(ttl.TTL) * time.Second; left < callMargin {
		return fmt.Errorf("%w: its lease %x has %s left, less than one call may take (%s)", ErrLockLost, l.session.Lease(), left, callMargin)
	}
	return nil
}

// Fence is Check for one call: the context it returns expires one call's
// deadline (CallTimeout) after the check began, before the lease could
// run out, so that a call made with it is sent while the lock is still
// ours or not at all, even if this process pauses in between.
func (l *Lock) Fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	start := time.Now()
	if err := l.Check(ctx); err != nil {
		return ctx, func() {}, err
	}
	fenced, cancel := context.WithDeadline(ctx, start.Add(CallTimeout))
	return fenced, cancel, nil
}

// Kept asks the cluster whether the lock's lease is still alive: after a
// membership change, whether the change was made entirely under the lock
// (a lease never comes back). An error means it could not tell.
func (l *Lock) Kept(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	ttl, err := l.session.Client().TimeToLive(ctx, l.session.Lease())
	if err != nil {
		return false, fmt.Errorf("check the cluster lock's lease %x: %w", l.session.Lease(), err)
	}
	return ttl.TTL > 0, nil
}

// Lease is the lease behind the lock.
func (l *Lock) Lease() clientv3.LeaseID { return l.session.Lease() }

// Unlock releases the lock and revokes its lease.
func (l *Lock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	err := l.mutex.Unlock(ctx)
	if cerr := l.c.closeSession(l.session); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

// session opens a lease-backed session on a client of its own
// (lockConn). The lease is granted with a deadline
// (concurrency.NewSession alone would wait forever on a cluster without
// quorum); its keepalive then runs until the session is closed.
func (c *Client) session(ctx context.Context) (*concurrency.Session, error) {
	gctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.lockConn()
	if err != nil {
		return nil, err
	}
	lease, err := cli.Grant(gctx, LockTTL)
	if err != nil {
		c.closeLockConn(cli)
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	return c.sessionOn(cli, lease.ID)
}

// sessionOn is a session on lease over cli, a lockConn client, which it
// closes when it fails.
func (c *Client) sessionOn(cli *clientv3.Client, lease clientv3.LeaseID) (*concurrency.Session, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(LockTTL), concurrency.WithLease(lease))
	if err != nil {
		c.closeLockConn(cli)
		return nil, fmt.Errorf("session on lease %x: %w", lease, err)
	}
	return s, nil
}

// lockConn is a client for one lock session only, closed with it
// (closeSession). A session's keepalive is a stream, and clientv3 keeps
// a client's LeaseKeepAlive stream open for the client's whole life, even
// after the session is orphaned and its lease revoked; an open stream
// makes the etcd it reaches wait out its graceful stop (7 s with etcd's
// defaults) whenever it stops. On the agent's main client every etcd
// restart after the first lock, a rollout's or a quota raise's, took
// those 7 s more.
func (c *Client) lockConn() (*clientv3.Client, error) {
	cli, err := clientv3.New(c.clusterConfig())
	if err != nil {
		return nil, fmt.Errorf("etcd client for the cluster lock (%v): %w", c.endpoints, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lockConns == nil {
		c.lockConns = map[*clientv3.Client]bool{}
	}
	c.lockConns[cli] = true
	return cli, nil
}

// closeLockConn closes a lockConn client.
func (c *Client) closeLockConn(cli *clientv3.Client) {
	c.mu.Lock()
	delete(c.lockConns, cli)
	c.mu.Unlock()
	_ = cli.Close()
}

// closeSession stops the keepalive, revokes the lease within CallTimeout
// (Session.Close would wait up to the whole TTL) and closes the session's
// own client (lockConn), ending its keepalive stream.
func (c *Client) closeSession(s *concurrency.Session) error {
	s.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	_, err := s.Client().Revoke(ctx, s.Lease())
	c.closeLockConn(s.Client())
	if err != nil {
		return fmt.Errorf("revoke lease %x: %w", s.Lease(), err)
	}
	return nil
}

// ResumeLock takes the cluster lock back on the lease an earlier process
// of this agent held it with (an agent restarting onto a new binary
// keeps its lock across the exec): a session on that lease, and the
// mutex key it made, still ours while the lease lives. ErrLockLost when
// the lease ran out (or another agent holds the lock since).
func (c *Client) ResumeLock(ctx context.Context, clusterName string, lease clientv3.LeaseID) (*Lock, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.lockConn()
	if err != nil {
		return nil, err
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		c.closeLockConn(cli)
		return nil, fmt.Errorf("resume the cluster lock: lease %x: %w", lease, err)
	}
	if ttl.TTL <= 0 {
		c.closeLockConn(cli)
		return nil, fmt.Errorf("%w: its lease %x expired", ErrLockLost, lease)
	}
	s, err := c.sessionOn(cli, lease)
	if err != nil {
		return nil, fmt.Errorf("resume the cluster lock: %w", err)
	}
	m := concurrency.NewMutex(s, LockKey(clusterName))
	// The key of our lease exists: TryLock takes its create revision as
	// ours and succeeds if it is still the oldest, that is, the owner.
	if err := m.TryLock(ctx); err != nil {
		_ = c.closeSession(s)
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%w: another agent holds it", ErrLockLost)
		}
		return nil, fmt.Errorf("resume the cluster lock on lease %x: %w", lease, err)
	}
	return &Lock{c: c, session: s, mutex: m}, nil
}

// LockTaken reports whether any agent holds the cluster lock now (a
// linearizable read of the lock's keys, which etcd serves under NOSPACE
// too): the NOSPACE procedure's unlocked steps wait while one does.
func (c *Client) LockTaken(ctx context.Context, clusterName string) (bool, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return false, err
	}
	resp, err := cli.Get(ctx, LockKey(clusterName)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read the cluster lock %s: %w", LockKey(clusterName), err)
	}
	return resp.Count > 0, nil
}
