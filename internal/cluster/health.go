package cluster

import (
	"google.golang.org/grpc"
	// Registers gRPC's client-side health check: without it the
	// healthCheckConfig below is ignored (grpc's clientconn.go,
	// startHealthCheck).
	_ "google.golang.org/grpc/health"
)

// healthCheckingConfig is clientv3's own service config (its resolver
// supplies round_robin, client/v3/internal/resolver/resolver.go) with
// gRPC's client-side health checking added: every connection watches the
// member's grpc.health.v1 status for the whole server (service "").
const healthCheckingConfig = `{"loadBalancingPolicy":"round_robin","healthCheckConfig":{"serviceName":""}}`

// HealthChecking are the dial options (clientv3.Config.DialOptions) of a
// client that sends no call to a member whose gRPC health is NOT_SERVING.
// etcd with the feature gate StopGRPCServiceOnDefrag (on in every etcd
// the agents start: etcdproc's default flags) reports NOT_SERVING for as
// long as it defragments, and answers nothing meanwhile; with these
// options the client's calls go to the other endpoints and come back to
// that member when it reports SERVING again. The resolver's service
// config must be ignored for the default one to apply.
//
// It is for clients of several endpoints. etcd refuses the health stream
// on a learner (it serves no stream but Snapshot) and before the member
// knows its cluster version, so such a connection never becomes ready: a
// client of one learner would never reach it (Client.conn).
func HealthChecking() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDisableServiceConfig(), grpc.WithDefaultServiceConfig(healthCheckingConfig)}
}
