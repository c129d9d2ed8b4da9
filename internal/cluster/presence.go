package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// AgentRecord is what each live agent publishes about itself under
// /etcdkeeper/<cluster>/agents/<name>, bound to a lease: it disappears
// when the agent dies.
type AgentRecord struct {
	Name       string   `json:"name"`
	Generation string   `json:"generation"`
	Members    []string `json:"members"`
	Phase      string   `json:"phase"`
	Decision   string   `json:"decision"`
	Addr       string   `json:"addr,omitempty"`
}

// AgentsKey is the prefix of the agents' records.
func AgentsKey(clusterName string) string { return "/etcdkeeper/" + clusterName + "/agents/" }

// Presence keeps one agent's record alive in the cluster.
type Presence struct {
	session *concurrency.Session
	last    string
}

// NewPresence opens the lease that carries the agent's record.
func (c *Client) NewPresence(ctx context.Context) (*Presence, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("presence session: %w", err)
	}
	return &Presence{session: s}, nil
}

// Alive reports whether the record's lease is still kept alive.
func (p *Presence) Alive() bool {
	select {
	case <-p.session.Done():
		return false
	default:
		return true
	}
}

// Publish writes the record when it changed.
func (p *Presence) Publish(ctx context.Context, clusterName string, r AgentRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode agent record: %w", err)
	}
	if string(b) == p.last {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if _, err := p.session.Client().Put(ctx, AgentsKey(clusterName)+r.Name, string(b), clientv3.WithLease(p.session.Lease())); err != nil {
		return fmt.Errorf("publish agent record: %w", err)
	}
	p.last = string(b)
	return nil
}

// Close revokes the lease, removing the record. It waits at most
// CallTimeout: on shutdown the cluster may already be gone.
func (p *Presence) Close() error { return closeSession(p.session) }

// Agents reads the records of the live agents.
func (c *Client) Agents(ctx context.Context, clusterName string) ([]AgentRecord, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Get(ctx, AgentsKey(clusterName), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read agent records: %w", err)
	}
	out := make([]AgentRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r AgentRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
