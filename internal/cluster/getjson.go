package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// getJSON reads the JSON value at key into v (a linearizable read): nil
// and nothing read when there is none; what names the value in errors.
func (c *Client) getJSON(ctx context.Context, key, what string, v any) (*mvccpb.KeyValue, uint64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, 0, err
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read the %s: %w", what, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.ClusterId, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, v); err != nil {
		return resp.Kvs[0], resp.Header.ClusterId, fmt.Errorf("the %s %s does not parse: %w", what, key, err)
	}
	return resp.Kvs[0], resp.Header.ClusterId, nil
}
