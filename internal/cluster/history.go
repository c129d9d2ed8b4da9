package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
)

// The agents' history (history.Event) lives under
// /etcdkeeper/<cluster>/history/<event ID>: the IDs sort by time, so the
// oldest are the first keys of the range.

// HistoryKey is the prefix of the history's events.
func HistoryKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/history/" }

// AppendHistory writes evs (at most history.MaxPush) in one transaction,
// then drops the oldest events beyond keep. Writing an event again (a
// push whose answer was lost) rewrites the same key: no duplicate.
func (c *Client) AppendHistory(ctx context.Context, clusterName string, evs []history.Event, keep int) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	ops := make([]clientv3.Op, 0, len(evs))
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode history event: %w", err)
		}
		ops = append(ops, clientv3.OpPut(HistoryKey(clusterName)+e.ID(), string(b)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("append to the history: %w", err)
	}
	return trimHistory(ctx, cli, HistoryKey(clusterName), keep)
}

// trimHistory deletes the oldest events beyond keep: the work is bounded
// by what was appended since the last trim.
func trimHistory(ctx context.Context, cli *clientv3.Client, prefix string, keep int) error {
	n, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count the history: %w", err)
	}
	over := n.Count - int64(keep)
	if over <= 0 {
		return nil
	}
	old, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(over))
	if err != nil {
		return fmt.Errorf("find the history's oldest events: %w", err)
	}
	if len(old.Kvs) == 0 {
		return nil
	}
	end := string(old.Kvs[len(old.Kvs)-1].Key) + "\x00"
	if _, err := cli.Delete(ctx, string(old.Kvs[0].Key), clientv3.WithRange(end)); err != nil {
		return fmt.Errorf("drop the history's oldest events: %w", err)
	}
	return nil
}

// History reads the cluster's history, oldest first (a linearizable
// read: what the cluster has now).
func (c *Client) History(ctx context.Context, clusterName string) ([]history.Event, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Get(ctx, HistoryKey(clusterName), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("read the history: %w", err)
	}
	out := make([]history.Event, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var e history.Event
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}
