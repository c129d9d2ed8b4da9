package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// RecoveredKey holds the record of the last recovery from quorum loss
// (model.Recovered), written by its source into the recovered cluster: a
// host that was off during it learns there that its old member is gone
// for good, even when the recovered cluster has a new ID.
func RecoveredKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/recovered" }

// PutRecovered writes the recovery record.
func (c *Client) PutRecovered(ctx context.Context, clusterName string, r model.Recovered) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the recovery record: %w", err)
	}
	if _, err := cli.Put(ctx, RecoveredKey(clusterName), string(b)); err != nil {
		return fmt.Errorf("write the recovery record: %w", err)
	}
	return nil
}

// GetRecovered reads the recovery record; nil when there is none.
func (c *Client) GetRecovered(ctx context.Context, clusterName string) (*model.Recovered, error) {
	var r model.Recovered
	kv, _, err := c.getJSON(ctx, RecoveredKey(clusterName), "recovery record", &r)
	if kv == nil || err != nil {
		return nil, err
	}
	return &r, nil
}
