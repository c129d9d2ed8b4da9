package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// LeaderMovedKey holds the agents' last leader move, under a lease of
// model.LeaderMoveQuiet: while it is there, the leader placement moves
// nothing. The lease times it on the cluster's clock, not on any
// host's, and it outlives the agent that wrote it.
func LeaderMovedKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/leader-moved" }

// PutLeaderMoved records a leader move the agent just made.
func (c *Client) PutLeaderMoved(ctx context.Context, clusterName string, m model.LeaderMoved) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode the leader move: %w", err)
	}
	lease, err := cli.Grant(ctx, int64(model.LeaderMoveQuiet/time.Second))
	if err != nil {
		return fmt.Errorf("the leader move's lease: %w", err)
	}
	if _, err := cli.Put(ctx, LeaderMovedKey(clusterName), string(b), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("record the leader move: %w", err)
	}
	return nil
}

// GetLeaderMoved is the agents' last leader move while its lease lasts
// (nil: none in the last model.LeaderMoveQuiet).
func (c *Client) GetLeaderMoved(ctx context.Context, clusterName string) (*model.LeaderMoved, error) {
	var m model.LeaderMoved
	kv, _, err := c.getJSON(ctx, LeaderMovedKey(clusterName), "leader move", &m)
	if err != nil || kv == nil {
		return nil, err
	}
	return &m, nil
}
