package etcdproc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Bootstrap says how a member with an empty data dir forms or joins its
// cluster. It is ignored by etcd when the data dir already holds a member.
type Bootstrap struct {
	// State is "new" (form the cluster from the spec) or "existing" (join
	// a running cluster as a member that was added through the API).
	State string
	// InitialCluster is name=peerURL,... For "existing" it must list
	// exactly the cluster's current members (voters, learners and this
	// one), or etcd refuses with "member count is unequal".
	InitialCluster string
}

// defaultFlags are etcd settings the agent turns on unless the spec's
// etcd.flags sets them.
var defaultFlags = map[string]string{
	// Corruption found by etcd itself at start and between members must
	// surface as a failure the agent can classify and repair.
	"feature-gates": "InitialCorruptCheck=true,CompactHashCheck=true",
	"logger":        "zap",
	"log-outputs":   "stderr",
}

// Flags builds etcd's command line for member m: the one place that does.
func Flags(s *spec.Spec, m spec.Member, b Bootstrap) []string {
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-peer-urls=" + strings.Join(m.ListenPeerURLs, ","),
		"--listen-client-urls=" + strings.Join(m.ListenClientURLs, ","),
		"--initial-advertise-peer-urls=" + strings.Join(m.PeerURLs, ","),
		"--advertise-client-urls=" + strings.Join(m.ClientURLs, ","),
		"--initial-cluster-token=" + s.Cluster.Name,
		"--initial-cluster-state=" + b.State,
		"--initial-cluster=" + b.InitialCluster,
	}
	args = append(args, tlsFlags(m.TLS)...)
	extra := map[string]string{}
	for k, v := range defaultFlags {
		extra[k] = v
	}
	for k, v := range s.Etcd.Flags {
		extra[strings.TrimLeft(k, "-")] = v
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, fmt.Sprintf("--%s=%s", k, extra[k]))
	}
	return args
}

// tlsFlags are etcd's TLS flags for the member's certificates, only those
// the spec sets (validation made them consistent).
func tlsFlags(t spec.TLS) []string {
	var out []string
	side := func(prefix string, s spec.TLSServer) {
		for _, f := range []struct{ name, value string }{
			{"cert-file", s.CertFile},
			{"key-file", s.KeyFile},
			{"trusted-ca-file", s.TrustedCAFile},
		} {
			if f.value != "" {
				out = append(out, "--"+prefix+f.name+"="+f.value)
			}
		}
		if s.ClientCertAuth {
			out = append(out, "--"+prefix+"client-cert-auth=true")
		}
	}
	side("", t.Client)
	side("peer-", t.Peer)
	return out
}

// NewClusterBootstrap is the bootstrap of a cluster that has never run: the
// whole spec is the initial cluster.
func NewClusterBootstrap(s *spec.Spec) Bootstrap {
	return Bootstrap{State: "new", InitialCluster: s.InitialCluster()}
}
