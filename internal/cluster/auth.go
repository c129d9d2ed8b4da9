package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// reloginEvery bounds how often a call refused for permission makes the
// client log in again: a user that really lacks the permission costs one
// login and one retry per interval, not a loop.
const reloginEvery = 10 * time.Second

// reloginInterceptor makes a client that connected while etcd's auth was
// off log in once auth is on. clientv3 logs in only at New, and not at
// all while auth is off ("authentication is not enabled"); its calls
// then carry no token. Without a client certificate etcd refuses them
// with "user name is empty", which clientv3 answers by logging in and
// retrying. With one, etcd judges them as the certificate's CN instead
// (AuthInfoFromTLS), and a CN that is no privileged user is refused with
// "permission denied" — its lease revokes at shutdown too. For a client
// with credentials, that refusal is turned into the "user name is empty"
// that makes clientv3 log in and retry (its retry interceptor is the
// outer one).
func (c *Client) reloginInterceptor() grpc.UnaryClientInterceptor {
	var last atomic.Int64 // unix nanos of the last relogin asked
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || c.auth.user == "" || !errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
			return err
		}
		now, prev := time.Now().UnixNano(), last.Load()
		if now-prev < int64(reloginEvery) || !last.CompareAndSwap(prev, now) {
			return err
		}
		return rpctypes.ErrGRPCUserEmpty
	}
}
