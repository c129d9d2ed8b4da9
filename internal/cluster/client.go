// Package cluster is the agent's thin layer over etcd's client API: every
// call has a deadline, membership calls are idempotent (an already-done
// change is success), and the cluster is observed as plain values for the
// pure decisions in package reconcile.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// CallTimeout bounds every single etcd call the agent makes. It stays well
// under systemd's watchdog interval: a call to a dead member must not stall
// the loop that pings the watchdog.
const CallTimeout = 2 * time.Second

// Client talks to the cluster through a set of client endpoints.
type Client struct {
	c       *clientv3.Client
	tls     *tls.Config
	timeout time.Duration
}

// Dial connects to endpoints without waiting for any of them to answer.
func Dial(endpoints []string, tlsCfg *tls.Config) (*Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          CallTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: CallTimeout,
		TLS:                  tlsCfg,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return &Client{c: c, tls: tlsCfg, timeout: CallTimeout}, nil
}

// Close releases the connections.
func (c *Client) Close() error { return c.c.Close() }

// Raw is the underlying client, for the lock and for tests.
func (c *Client) Raw() *clientv3.Client { return c.c }

func (c *Client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// Members lists the members linearizably (it needs a leader) and returns
// the cluster ID.
func (c *Client) Members(ctx context.Context) (uint64, []*etcdserverpb.Member, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.c.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("member list: %w", err)
	}
	return resp.Header.ClusterId, resp.Members, nil
}

// AddLearner adds a learner with peerURLs and returns it with the member
// list that includes it.
func (c *Client) AddLearner(ctx context.Context, peerURLs []string) (*etcdserverpb.Member, []*etcdserverpb.Member, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.c.MemberAddAsLearner(ctx, peerURLs)
	if err != nil {
		return nil, nil, fmt.Errorf("member add --learner %v: %w", peerURLs, err)
	}
	return resp.Member, resp.Members, nil
}

// Remove removes member id; a member that is already gone is success.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.c.MemberRemove(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
		return fmt.Errorf("member remove %x: %w", id, err)
	}
	return nil
}

// Promote promotes learner id; a member that is already a voter is success.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.c.MemberPromote(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrMemberNotLearner) {
		return fmt.Errorf("member promote %x: %w", id, err)
	}
	return nil
}

// UpdatePeerURLs changes the peer URLs of member id. Never call it on a
// learner: before etcd 3.6.12 that silently promoted it.
func (c *Client) UpdatePeerURLs(ctx context.Context, id uint64, peerURLs []string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if _, err := c.c.MemberUpdate(ctx, id, peerURLs); err != nil {
		return fmt.Errorf("member update %x %v: %w", id, peerURLs, err)
	}
	return nil
}

// MoveLeader asks the leader, reached at leaderEndpoint, to hand
// leadership to member to.
func (c *Client) MoveLeader(ctx context.Context, leaderEndpoint string, to uint64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leaderEndpoint}, DialTimeout: c.timeout, TLS: c.tls, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("client for leader %s: %w", leaderEndpoint, err)
	}
	defer cli.Close()
	if _, err := cli.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leader to %x: %w", to, err)
	}
	return nil
}

// Status asks one endpoint for its status.
func (c *Client) Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.c.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return resp, nil
}

// IsLearnerNotReady reports etcd's refusal to promote a learner that has
// not caught up yet: retry later.
func IsLearnerNotReady(err error) bool { return errors.Is(err, rpctypes.ErrMemberLearnerNotReady) }
