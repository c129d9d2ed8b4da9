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
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// CallTimeout bounds every single etcd call the agent makes. It stays well
// under systemd's watchdog interval: a call to a dead member must not stall
// the loop that pings the watchdog.
const CallTimeout = 2 * time.Second

// Client talks to the cluster through a set of client endpoints.
type Client struct {
	endpoints []string
	tls       *tls.Config
	auth      credentials
	timeout   time.Duration

	mu sync.Mutex
	c  *clientv3.Client // see conn
	// direct dials the connections to one member (statusConn) without
	// health checking: see conn.
	direct *clientv3.Client
	// active is the endpoints c uses, when narrowed by steer (nil: all
	// of endpoints).
	active []string
	// statusConns are the connections Status reuses, by endpoint: see
	// Status.
	statusConns map[string]*grpc.ClientConn
	// lockConns are the lock sessions' own clients still open (see
	// lockConn): Close closes them too, ending their keepalives.
	lockConns map[*clientv3.Client]bool

	// progress is each member's committed index at the previous Observe,
	// so that Observe can tell a member that catches up from one that
	// lags or is stuck (model.CaughtUp); catchUp is the rule's bound.
	progressMu sync.Mutex
	progress   model.Progress
	catchUp    uint64
	// quotas are the spec's quota-backend-bytes by member name, for an
	// etcd that does not report its own (before 3.6).
	quotas map[string]int64
}

// credentials are an etcd user's, for clusters with auth enabled.
type credentials struct{ user, password string }

// DialOption adds to how Dial connects.
type DialOption func(*Client)

// WithCredentials logs in as user: needed when the cluster has auth
// enabled. clientv3 ignores them while auth is off.
func WithCredentials(user, password string) DialOption {
	return func(c *Client) { c.auth = credentials{user: user, password: password} }
}

// WithCatchUpBound sets how far behind the leader a voter may be and
// still count as caught up (model.CatchUpBound); the default is etcd's
// default snapshot-catchup-entries'.
func WithCatchUpBound(entries uint64) DialOption {
	return func(c *Client) { c.catchUp = entries }
}

// WithQuotas sets each member's quota-backend-bytes by name, as the spec
// says, for members whose etcd does not report it (etcd before 3.6).
func WithQuotas(quotas map[string]int64) DialOption {
	return func(c *Client) { c.quotas = quotas }
}

// Dial connects to endpoints without waiting for any of them to answer.
// tlsCfg is nil for plain http.
func Dial(endpoints []string, tlsCfg *tls.Config, opts ...DialOption) (*Client, error) {
	c := &Client{endpoints: endpoints, tls: tlsCfg, timeout: CallTimeout, progress: model.Progress{}, catchUp: model.CatchUpBound(0)}
	for _, o := range opts {
		o(c)
	}
	if c.auth.user != "" {
		return c, nil // logs in on first use: see conn
	}
	if _, err := c.conn(); err != nil {
		return nil, err
	}
	return c, nil
}

// conn is the etcd client, made on first use when there are credentials:
// clientv3.New logs in at once and fails while no endpoint answers, and
// the agent must be able to dial a cluster that is down, to find out that
// no peer answers. Until the login succeeds, every call fails with the
// reason.
func (c *Client) conn() (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		return c.c, nil
	}
	cli, err := clientv3.New(c.clusterConfig())
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", c.endpoints, err)
	}
	// A connection clientv3 dials to one member (Client.Dial) takes the
	// main client's dial options, health checking too, and etcd refuses
	// the health stream on a learner ("rpc not supported for learner":
	// a learner serves no stream but Snapshot) and before its cluster
	// version is known: a health-checking connection to a learner never
	// becomes ready, and its Status never leaves the client. Calls meant
	// for one member go to it whatever its health; they dial through a
	// client without it (no connection until its first call).
	direct := cli
	if len(c.endpoints) > 1 {
		if direct, err = clientv3.New(c.config(c.endpoints...)); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("etcd client for %v: %w", c.endpoints, err)
		}
	}
	c.c, c.direct = cli, direct
	return cli, nil
}

// clusterConfig is the config of a client of the whole cluster (the main
// client, a lock session's): of more than one endpoint, health checking.
func (c *Client) clusterConfig() clientv3.Config {
	cfg := c.config(c.endpoints...)
	if len(c.endpoints) > 1 {
		cfg.DialOptions = append(HealthChecking(), cfg.DialOptions...)
	}
	return cfg
}

// config is the clientv3 config for endpoints with this client's TLS and
// credentials: the main client and the one-endpoint clients (snapshot,
// move leader, defragment) connect the same way. The main client of more
// than one endpoint adds HealthChecking (conn): its calls go to no member
// while it defragments.
func (c *Client) config(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          c.timeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: c.timeout,
		TLS:                  c.tls,
		Username:             c.auth.user,
		Password:             c.auth.password,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.reloginInterceptor())},
	}
}

// Close releases the connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeStatusConns()
	for cli := range c.lockConns {
		_ = cli.Close()
	}
	c.lockConns = nil
	if c.c == nil {
		return nil
	}
	if c.direct != c.c {
		_ = c.direct.Close()
	}
	return c.c.Close()
}

func (c *Client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// Members lists the members linearizably (it needs a leader) and returns
// the cluster ID.
func (c *Client) Members(ctx context.Context) (uint64, []*etcdserverpb.Member, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return 0, nil, err
	}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("member list: %w", err)
	}
	return resp.Header.ClusterId, resp.Members, nil
}

// AddLearner adds a learner with peerURLs and returns it with the member
// list that includes it: the list a joining member's --initial-cluster
// must match.
func (c *Client) AddLearner(ctx context.Context, peerURLs []string) (model.Member, []model.Member, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return model.Member{}, nil, err
	}
	resp, err := cli.MemberAddAsLearner(ctx, peerURLs)
	if err != nil {
		return model.Member{}, nil, fmt.Errorf("member add --learner %v: %w", peerURLs, err)
	}
	return fromPB(resp.Member), fromPBs(resp.Members), nil
}

// Remove removes member id from cluster clusterID. A member that is
// already gone is success — but only when the member list of that same
// cluster confirms it: "member not found" from another cluster at the
// same URLs proves nothing. (A remove answered by another cluster is
// reported after the fact; member IDs are random 64-bit values, so that
// cluster would have to list the same ID for the remove to touch it.)
func (c *Client) Remove(ctx context.Context, clusterID, id uint64) error {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	resp, err := cli.MemberRemove(rctx, id)
	switch {
	case err == nil && resp.Header.ClusterId != clusterID:
		return fmt.Errorf("member remove %x: answered by cluster %x, not %x", id, resp.Header.ClusterId, clusterID)
	case err == nil:
		return nil
	case !errors.Is(err, rpctypes.ErrMemberNotFound):
		return fmt.Errorf("member remove %x: %w", id, err)
	}
	got, members, err := c.Members(ctx)
	if err != nil {
		return fmt.Errorf("member remove %x: not found, and the member list to confirm it failed: %w", id, err)
	}
	if got != clusterID {
		return fmt.Errorf("member remove %x: not found in cluster %x, which is not cluster %x", id, got, clusterID)
	}
	for _, m := range members {
		if m.ID == id {
			return fmt.Errorf("member remove %x: not found, but cluster %x still lists it", id, got)
		}
	}
	return nil
}

// Promote promotes learner id; a member that is already a voter is success.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	_, err = cli.MemberPromote(ctx, id)
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
	cli, err := c.conn()
	if err != nil {
		return err
	}
	if _, err := cli.MemberUpdate(ctx, id, peerURLs); err != nil {
		return fmt.Errorf("member update %x %v: %w", id, peerURLs, err)
	}
	return nil
}

// MoveLeader asks the leader, reached at leaderEndpoint, to hand
// leadership to member to.
func (c *Client) MoveLeader(ctx context.Context, leaderEndpoint string, to uint64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := clientv3.New(c.config(leaderEndpoint))
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
func (c *Client) Status(parent context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := c.ctx(parent)
	defer cancel()
	if _, err := c.conn(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	cli := c.direct
	c.mu.Unlock()
	conn, err := c.statusConn(cli, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	resp, err := clientv3.RetryMaintenanceClient(cli, conn).Status(ctx, &etcdserverpb.StatusRequest{})
	if err != nil {
		// A connection that failed is dialed afresh next time, as
		// clientv3's own Status does every time: gRPC's reconnect backoff
		// (up to two minutes) would hide a member that is back.
		// gRPC's retries end in the deadline, which hides a refused
		// handshake (a certificate etcd or the agent does not accept):
		// a connection that failed, rather than one still connecting (a
		// frozen etcd), is asked why.
		failed := conn.GetState() == connectivity.TransientFailure
		c.dropStatusConn(endpoint, conn)
		if c.tls != nil && failed {
			if herr := probeHandshake(parent, endpoint, c.tls); herr != nil {
				return nil, fmt.Errorf("status of %s: %w", endpoint, herr)
			}
		}
		return nil, fmt.Errorf("status of %s: %w", endpoint, clientv3.ContextError(ctx, err))
	}
	return (*clientv3.StatusResponse)(resp), nil
}

// maxStatusConns bounds the kept status connections: endpoints of removed
// members are not used again.
const maxStatusConns = 16

// statusConn is a kept connection to endpoint, with the client's TLS and
// auth token. clientv3's Maintenance.Status dials and closes one per
// call: at every pass, for the local member and each member of the
// cluster, most of an idle agent's CPU.
func (c *Client) statusConn(cli *clientv3.Client, endpoint string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	if conn, ok := c.statusConns[endpoint]; ok {
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	conn, err := cli.Dial(endpoint)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.statusConns[endpoint]; ok {
		_ = conn.Close() // another call dialed it meanwhile
		return kept, nil
	}
	if c.statusConns == nil {
		c.statusConns = map[string]*grpc.ClientConn{}
	}
	for ep, old := range c.statusConns {
		if len(c.statusConns) < maxStatusConns {
			break
		}
		// One out, not all: calls running in parallel keep theirs.
		_ = old.Close()
		delete(c.statusConns, ep)
	}
	c.statusConns[endpoint] = conn
	return conn, nil
}

func (c *Client) dropStatusConn(endpoint string, conn *grpc.ClientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.statusConns[endpoint] == conn {
		delete(c.statusConns, endpoint)
	}
	_ = conn.Close()
}

// closeStatusConns closes the kept status connections; c.mu is held.
func (c *Client) closeStatusConns() {
	for ep, conn := range c.statusConns {
		_ = conn.Close()
		delete(c.statusConns, ep)
	}
}

// IsLearnerNotReady reports etcd's refusal to promote a learner that has
// not caught up yet: retry later.
func IsLearnerNotReady(err error) bool { return errors.Is(err, rpctypes.ErrMemberLearnerNotReady) }
