package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// RequestKey holds the operator's request (model.Request) the agents carry
// out: one at a time.
func RequestKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/request" }

// RequestTTL is the lease TTL in seconds of a request: a command that
// dies takes its request with it this long after. It outlasts a member
// out of service for an offline defragmentation (11–20 s), which the
// command's connection may have to fail over from (with 10 s, a command
// under load lost its request so, and waited out its timeout).
const RequestTTL = 30

// ErrRequestPending means another operator's request is under way.
var ErrRequestPending = errors.New("another operator's request is under way")

// Requested is a request written into the cluster, kept alive by this
// process until Close.
type Requested struct {
	session *concurrency.Session
	// Other is the request that was there already (with ErrRequestPending).
	Other *model.Request
}

// PutRequest writes r, bound to a new lease this process keeps alive, if
// no other request is there (ErrRequestPending, with the other one).
func (c *Client) PutRequest(ctx context.Context, clusterName string, r model.Request) (*Requested, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(RequestTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("the request's lease: %w", err)
	}
	key := RequestKey(clusterName)
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("write the request %s: %w", key, err)
	}
	if !resp.Succeeded {
		_ = s.Close()
		q := &Requested{}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			var other model.Request
			if json.Unmarshal(kvs[0].Value, &other) == nil {
				q.Other = &other
			}
		}
		return q, ErrRequestPending
	}
	return &Requested{session: s}, nil
}

// Lost is closed when the request's lease is gone: revoked, or run out
// because this process could not keep it alive.
func (q *Requested) Lost() <-chan struct{} { return q.session.Done() }

// Close withdraws the request: its lease is revoked, so the key goes.
func (q *Requested) Close() error {
	if q == nil || q.session == nil {
		return nil
	}
	if err := q.session.Close(); err != nil {
		return fmt.Errorf("withdraw the request: %w", err)
	}
	return nil
}

// GetRequest reads the operator's request; nil when there is none.
func (c *Client) GetRequest(ctx context.Context, clusterName string) (*model.Request, error) {
	var r model.Request
	kv, _, err := c.getJSON(ctx, RequestKey(clusterName), "request", &r)
	if kv == nil || err != nil {
		return nil, err
	}
	return &r, nil
}
