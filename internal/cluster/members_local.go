package cluster

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LocalMembers lists the members as the endpoint's member itself knows
// them (serializable: it answers without a leader), for a recovery's
// count of the voters anyone knows.
func (c *Client) LocalMembers(ctx context.Context) ([]*etcdserverpb.Member, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("member list (serializable): %w", err)
	}
	return resp.Members, nil
}
