package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// SnapshotTimeout bounds one snapshot download.
const SnapshotTimeout = 10 * time.Minute

// SaveSnapshot streams a snapshot of the keyspace from endpoint into path
// (see package atomicfile: never half a snapshot there) and returns its size.
func (c *Client) SaveSnapshot(ctx context.Context, endpoint, path string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("snapshot dir: %w", err)
	}
	var n int64
	if err := atomicfile.Write(path, 0o600, func(w io.Writer) (err error) {
		n, err = c.WriteSnapshot(ctx, endpoint, w)
		return err
	}); err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	return n, nil
}

// WriteSnapshot streams a snapshot of the keyspace from endpoint into w
// (etcd's db followed by the sha256 etcd appends) and returns its size.
func (c *Client) WriteSnapshot(ctx context.Context, endpoint string, w io.Writer) (int64, error) {
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
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("snapshot from %s: %w", endpoint, err)
	}
	return n, nil
}
