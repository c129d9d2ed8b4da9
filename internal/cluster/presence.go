package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// An agent's record (model.AgentRecord) lives under
// /etcdkeeper/<cluster>/agents/<name>, bound to a lease: it disappears
// when the agent dies.

// AgentsKey is the prefix of the agents' records.
func AgentsKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/agents/" }

// PresenceTTL is the lease TTL (seconds) of an agent's record: the
// record of an agent that died disappears this long after its last
// refresh.
const PresenceTTL = 20

// Presence keeps one agent's record alive in the cluster. It refreshes
// its lease with single calls from the agent's loop, not with a keepalive
// stream: an open stream makes every etcd it is connected to wait out its
// graceful-stop timeout (seconds) before it can stop.
type Presence struct {
	c         *Client
	lease     clientv3.LeaseID
	refreshed time.Time
	dead      bool
	last      string
	// heldOff: a put refused for NOSPACE waits until then (the lease's
	// keepalive goes on): each refused put is a raft entry and a warning
	// in every member's log.
	heldOff time.Time
}

// noSpaceBackoff is how long a record refused under NOSPACE waits before
// it is put again.
const noSpaceBackoff = 10 * time.Second

// NewPresence grants the lease that carries the agent's record.
func (c *Client) NewPresence(ctx context.Context) (*Presence, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Grant(ctx, PresenceTTL)
	if err != nil {
		return nil, fmt.Errorf("presence lease: %w", err)
	}
	return &Presence{c: c, lease: resp.ID, refreshed: time.Now()}, nil
}

// Alive reports whether the record's lease is still known to be alive.
func (p *Presence) Alive() bool {
	return !p.dead && time.Since(p.refreshed) < PresenceTTL*time.Second
}

// refresh renews the lease once when a quarter of its TTL has passed.
func (p *Presence) refresh(ctx context.Context) error {
	if time.Since(p.refreshed) < PresenceTTL*time.Second/4 {
		return nil
	}
	err := p.call(ctx, "refresh presence lease", func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.KeepAliveOnce(ctx, p.lease)
		return err
	})
	if err == nil {
		p.refreshed = time.Now()
	}
	return err
}

// call runs one etcd call on the presence lease with a deadline; a lease
// etcd no longer knows marks the presence dead (it is granted anew).
func (p *Presence) call(ctx context.Context, what string, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := p.c.ctx(ctx)
	defer cancel()
	cli, err := p.c.conn()
	if err != nil {
		return err
	}
	if err := f(ctx, cli); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			p.dead = true
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Publish refreshes the lease and writes the record when it changed.
func (p *Presence) Publish(ctx context.Context, clusterName string, r model.AgentRecord) error {
	if err := p.refresh(ctx); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode agent record: %w", err)
	}
	if string(b) == p.last || time.Now().Before(p.heldOff) {
		return nil
	}
	err = p.call(ctx, "publish agent record", func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Put(ctx, AgentsKey(clusterName)+r.Name, string(b), clientv3.WithLease(p.lease))
		return err
	})
	if errors.Is(err, rpctypes.ErrNoSpace) {
		p.heldOff = time.Now().Add(noSpaceBackoff)
	}
	if err != nil {
		return err
	}
	p.last = string(b)
	return nil
}

// Close revokes the lease, removing the record, within closeTimeout: on
// shutdown the cluster may already be gone. A revoke refused while the
// client logs in again (etcd's auth enabled under it) or slow on a loaded
// host is tried again; a lease etcd no longer knows is gone already.
func (p *Presence) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	cli, err := p.c.conn()
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 && errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) && p.c.auth.user != "" {
			// Refused as the certificate's CN: the client holds no
			// token (a relogin cut short, then rate-limited). A new
			// client logs in as it connects.
			err = p.revokeFresh(ctx)
		} else {
			_, err = cli.Revoke(ctx, p.lease)
		}
		if err == nil || errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
			return nil
		}
		if attempt == closeAttempts || ctx.Err() != nil {
			return fmt.Errorf("revoke presence lease %x (%d attempts): %w", int64(p.lease), attempt, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// revokeFresh revokes the lease through a new client of the cluster,
// which logs in with the credentials as it connects.
func (p *Presence) revokeFresh(ctx context.Context) error {
	cfg := p.c.config(p.c.endpoints...)
	cfg.Context = ctx
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Revoke(ctx, p.lease)
	return err
}

// closeTimeout and closeAttempts bound Close.
const (
	closeTimeout  = 2 * CallTimeout
	closeAttempts = 3
)

// Agents reads the records of the live agents.
func (c *Client) Agents(ctx context.Context, clusterName string) ([]model.AgentRecord, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Get(ctx, AgentsKey(clusterName), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read agent records: %w", err)
	}
	out := make([]model.AgentRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r model.AgentRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
