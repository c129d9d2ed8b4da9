package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// PauseKey holds the operator's pause (model.Pause), which every agent
// reads at each observation.
func PauseKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/pause" }

// MaxPauseTTL is etcd's longest lease TTL (lease.MaxLeaseTTL).
const MaxPauseTTL = 9000000000 * time.Second

// PutPause writes the pause in one transaction. A pause with an end is
// bound to a lease of that TTL, so the key goes by itself; the agents
// also stop honouring it once their clock passes Until, because etcd
// renews every lease to its full TTL when a new leader is elected (unless
// the LeaseCheckpoint feature gate is on), which would make it last longer.
func (c *Client) PutPause(ctx context.Context, clusterName string, p model.Pause) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	if p.ID == "" {
		var id [8]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("the pause's ID: %w", err)
		}
		p.ID = hex.EncodeToString(id[:])
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode the pause: %w", err)
	}
	var opts []clientv3.OpOption
	if !p.Until.IsZero() {
		ttl := int64(math.Ceil(p.Until.Sub(p.Since).Seconds()))
		lease, err := cli.Grant(ctx, max(ttl, 1))
		if err != nil {
			return fmt.Errorf("grant the pause's lease of %d s: %w", ttl, err)
		}
		opts = append(opts, clientv3.WithLease(lease.ID))
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(PauseKey(clusterName), string(b), opts...)).Commit(); err != nil {
		return fmt.Errorf("write the pause %s: %w", PauseKey(clusterName), err)
	}
	return nil
}

// GetPause reads the pause (a linearizable read); nil when there is none.
func (c *Client) GetPause(ctx context.Context, clusterName string) (*model.Pause, error) {
	var p model.Pause
	kv, clusterID, err := c.getJSON(ctx, PauseKey(clusterName), "pause", &p)
	if kv == nil || err != nil {
		return nil, err
	}
	p.Revision, p.ClusterID = kv.ModRevision, clusterID
	return &p, nil
}

// DeletePause ends the pause: it returns the pause it removed (nil: none
// was there) and revokes its lease.
func (c *Client) DeletePause(ctx context.Context, clusterName string) (*model.Pause, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Delete(ctx, PauseKey(clusterName), clientv3.WithPrevKV())
	if err != nil {
		return nil, fmt.Errorf("delete the pause %s: %w", PauseKey(clusterName), err)
	}
	if len(resp.PrevKvs) == 0 {
		return nil, nil
	}
	kv := resp.PrevKvs[0]
	if kv.Lease != 0 {
		// Only tidies up: the key is gone already.
		_, _ = cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	}
	return decodePause(clusterName, kv.Value)
}

func decodePause(clusterName string, b []byte) (*model.Pause, error) {
	var p model.Pause
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("the pause %s does not parse: %w", PauseKey(clusterName), err)
	}
	return &p, nil
}
