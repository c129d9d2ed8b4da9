package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TurnKey holds the host turn (model.HostTurn): one host at a time.
func TurnKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/turn" }

// ErrTurnTaken means another host holds the turn (or the turn changed
// since it was read).
var ErrTurnTaken = errors.New("the host turn was taken or changed by another host")

// GetTurn reads the host turn (nil: nobody holds it).
func (c *Client) GetTurn(ctx context.Context, clusterName string) (*model.HostTurn, error) {
	var t model.HostTurn
	kv, _, err := c.getJSON(ctx, TurnKey(clusterName), "host turn", &t)
	if kv == nil || err != nil {
		return nil, err
	}
	t.Revision = kv.ModRevision
	return &t, nil
}

// TakeTurn writes t if nobody holds the turn (ErrTurnTaken otherwise).
func (c *Client) TakeTurn(ctx context.Context, clusterName string, t model.HostTurn) (*model.HostTurn, error) {
	return c.putTurn(ctx, clusterName, t, clientv3.Compare(clientv3.CreateRevision(TurnKey(clusterName)), "=", 0))
}

// RenewTurn writes t over the turn it was read as (t.Revision):
// ErrTurnTaken when the key changed since.
func (c *Client) RenewTurn(ctx context.Context, clusterName string, t model.HostTurn) (*model.HostTurn, error) {
	return c.putTurn(ctx, clusterName, t, clientv3.Compare(clientv3.ModRevision(TurnKey(clusterName)), "=", t.Revision))
}

func (c *Client) putTurn(ctx context.Context, clusterName string, t model.HostTurn, cmp clientv3.Cmp) (*model.HostTurn, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode the host turn: %w", err)
	}
	key := TurnKey(clusterName)
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return nil, fmt.Errorf("write the host turn %s: %w", key, err)
	}
	if !resp.Succeeded {
		return nil, ErrTurnTaken
	}
	t.Revision = resp.Header.Revision
	return &t, nil
}

// DeleteTurn ends the turn t, as it was read (t.Revision): ErrTurnTaken
// when the key changed since (renewed by its holder, taken by another);
// nil when it is gone already.
func (c *Client) DeleteTurn(ctx context.Context, clusterName string, t model.HostTurn) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	key := TurnKey(clusterName)
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)).
		Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("delete the host turn %s: %w", key, err)
	}
	if !resp.Succeeded && len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
		return ErrTurnTaken
	}
	return nil
}
