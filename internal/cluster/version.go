package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClusterVersion asks the etcd at endpoint for the cluster version (its
// /version: {"etcdserver":"3.6.16","etcdcluster":"3.6.0"}): the version
// the members agree on, which an upgrade raises once every member runs
// the new minor.
func (c *Client) ClusterVersion(parent context.Context, endpoint string) (string, error) {
	ctx, cancel := c.ctx(parent)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("cluster version: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: c.tls, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("cluster version from %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", fmt.Errorf("cluster version from %s: %w", endpoint, err)
	}
	if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cluster version from %s: status %d: %.100q", endpoint, resp.StatusCode, body)
	}
	return v.Cluster, nil
}

// Downgrade is one call of etcd's downgrade API (etcdctl downgrade
// validate|enable|cancel): validate and enable take the target minor
// ("3.6"); cancel takes none.
func (c *Client) Downgrade(parent context.Context, action string, target string) error {
	ctx, cancel := c.ctx(parent)
	defer cancel()
	cli, err := c.conn()
	if err != nil {
		return err
	}
	kinds := map[string]clientv3.DowngradeAction{"validate": clientv3.DowngradeValidate, "enable": clientv3.DowngradeEnable, "cancel": clientv3.DowngradeCancel}
	kind, ok := kinds[action]
	if !ok {
		return fmt.Errorf("downgrade %s: no such action", action)
	}
	if _, err := cli.Downgrade(ctx, kind, target); err != nil {
		return fmt.Errorf("downgrade %s %s: %w", action, target, err)
	}
	return nil
}
