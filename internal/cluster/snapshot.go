package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SnapshotTimeout bounds one snapshot download.
const SnapshotTimeout = 10 * time.Minute

// SaveSnapshot streams a snapshot of the keyspace from endpoint into path
// (written to a temp file, fsynced, then renamed) and returns its size.
func (c *Client) SaveSnapshot(ctx context.Context, endpoint, path string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, SnapshotTimeout)
	defer cancel()
	cli, err := clientv3.New(c.config(endpoint))
	if err != nil {
		return 0, fmt.Errorf("client for %s: %w", endpoint, err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("snapshot from %s: %w", endpoint, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("snapshot dir: %w", err)
	}
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	n, err := io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("write snapshot %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("rename snapshot: %w", err)
	}
	return n, nil
}
