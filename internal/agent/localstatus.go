package agent

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
)

// errNotListening: the local etcd's client port refuses connections.
var errNotListening = errors.New("local etcd's client port is not listening yet")

// localStatus asks the local etcd for its status. While a just-started
// etcd settles it first checks that the client port listens: a status
// call made before it does fails its first connection, and gRPC then
// waits out its reconnect backoff (1 s) before it tries again, long after
// etcd is up. The call also stops waiting when etcd stalls in its publish
// (statusContext).
func (a *Agent) localStatus(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	if a.settling && !cluster.AnyListening(ctx, []string{endpoint}) {
		return nil, errNotListening
	}
	sctx, cancel := a.statusContext(ctx)
	defer cancel()
	return a.client.Status(sctx, endpoint)
}
