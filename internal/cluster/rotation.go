package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ClientsReadyKey holds, during a CA rotation with
// tls.ca.next.waitForClients, the operator's word that the clients trust
// the new CA (etcdkeeper certs rotate-ca --clients-ready). No lease: it
// outlives every agent and command; it names the new CA it is for, so an
// old one says nothing of a later rotation.
func ClientsReadyKey(clusterName string) string {
	return "/etcdkeeper/" + clusterName + "/ca-rotation/clients-ready"
}

// ClientsReady is what ClientsReadyKey holds.
type ClientsReady struct {
	// CA is the new CA (certs.CAID) the clients trust; Certs: they also
	// present its certificates (said once the members do: the old CA may
	// be dropped); By and At who said so and when.
	CA    string    `json:"ca"`
	Certs bool      `json:"certs,omitempty"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// PutClientsReady writes the operator's word that the clients trust ca.
func (c *Client) PutClientsReady(ctx context.Context, clusterName string, r ClientsReady) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, ClientsReadyKey(clusterName), string(b)); err != nil {
		return fmt.Errorf("write %s: %w", ClientsReadyKey(clusterName), err)
	}
	return nil
}

// GetClientsReady reads it (nil: never said).
func (c *Client) GetClientsReady(ctx context.Context, clusterName string) (*ClientsReady, error) {
	var r ClientsReady
	kv, _, err := c.getJSON(ctx, ClientsReadyKey(clusterName), "CA rotation's clients-ready", &r)
	if kv == nil || err != nil {
		return nil, err
	}
	return &r, nil
}
