package cluster

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefragDeadline bounds one defragmentation by the size of the db file it
// rewrites: a minute, and a minute more per GB, at most ten. etcd copies
// every key into a new file (about 1 GB in 10–40 s on the disks seen) and
// serves nothing on that member meanwhile.
func DefragDeadline(dbSize int64) time.Duration {
	d := time.Minute + time.Duration(dbSize/1e9)*time.Minute
	return min(d, 10*time.Minute)
}

// Defragment defragments the member reached at endpoint, within deadline.
// etcd's defragmentation is all or nothing per member: it writes the keys
// into a temporary file next to the db and renames it over the db only
// when done, so a call cut short (a deadline, an agent killed) leaves the
// old db in place and the next pass decides again.
func (c *Client) Defragment(ctx context.Context, endpoint string, deadline time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cli, err := clientv3.New(c.config(endpoint))
	if err != nil {
		return fmt.Errorf("client for %s: %w", endpoint, err)
	}
	defer cli.Close()
	if _, err := cli.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s (deadline %s): %w", endpoint, deadline, err)
	}
	return nil
}
