package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactDeadline bounds one compaction. etcd compacts in batches
// (1000 keys each, 10 ms apart by default) and answers a physical
// compaction only when done: about a minute per million revisions.
const CompactDeadline = 2 * time.Minute

// Compact compacts the cluster's history to rev, physically (etcd answers
// when the keys are deleted from its db; its dbSizeInUse may lag until
// the next write, see reconcile.settledAt). A revision compacted already is success: the step is
// taken again after a crash or by a new actor. Compaction is a raft
// proposal that etcd takes under NOSPACE (its capped applier refuses
// puts and lease grants only).
func (c *Client) Compact(ctx context.Context, rev int64) (already bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, CompactDeadline)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return false, err
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return true, nil
		}
		return false, fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	return false, nil
}

// NoSpaceCheckKey is the key the NOSPACE procedure writes after a disarm
// to prove that the cluster takes writes again.
func NoSpaceCheckKey(clusterName string) string {
	return "/etcdkeeper/" + clusterName + "/nospace-check"
}

// CheckPut writes value to key: a put that etcd accepts. Under NOSPACE it
// fails with etcd's "mvcc: database space exceeded".
func (c *Client) CheckPut(ctx context.Context, key, value string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, key, value); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}
