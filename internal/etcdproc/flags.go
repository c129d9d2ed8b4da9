package etcdproc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap/zapcore"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// defaultFlags are etcd settings the agent turns on unless the spec's
// etcd.flags sets them.
var defaultFlags = map[string]string{
	// Corruption found by etcd itself at start and between members must
	// surface as a failure the agent can classify and repair.
	// StopGRPCServiceOnDefrag: a member being defragmented answers nothing
	// for as long as it rewrites its db; with this gate its gRPC health
	// turns NOT_SERVING meanwhile, so that clients that health-check (the
	// agents', see cluster.HealthChecking) send their calls to the others.
	// It changes nothing for clients that do not. etcd 3.6 and 3.7 take
	// all three as --feature-gates; a spec's feature-gates replaces them.
	"feature-gates": "InitialCorruptCheck=true,CompactHashCheck=true,StopGRPCServiceOnDefrag=true",
	"logger":        "zap",
	"log-outputs":   "stderr",
}

// Flags are etcd's flags for member m started with bootstrap b: the one
// place that renders them (CommandFor adds the binary, Settings leaves out
// the bootstrap flags).
func Flags(s *spec.Spec, m spec.Member, b Bootstrap) []string {
	return slices.Concat(memberFlags(m), b.flags(s), tlsFlags(m.TLS), extraFlags(s, m))
}

// memberFlags name the member, its data dir and its URLs.
func memberFlags(m spec.Member) []string {
	return []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-peer-urls=" + strings.Join(m.ListenPeerURLs, ","),
		"--listen-client-urls=" + strings.Join(m.ListenClientURLs, ","),
		"--initial-advertise-peer-urls=" + strings.Join(m.PeerURLs, ","),
		"--advertise-client-urls=" + strings.Join(m.ClientURLs, ","),
	}
}

// extraFlags are the defaults overlaid with the spec's etcd.flags, then
// with the member's own flags, sorted by name so that the command line
// does not depend on map order.
func extraFlags(s *spec.Spec, m spec.Member) []string {
	extra := maps.Clone(defaultFlags)
	for _, flags := range []map[string]string{s.Etcd.Flags, m.Flags} {
		for k, v := range flags {
			extra[strings.TrimLeft(k, "-")] = v
		}
	}
	if _, quieter := passLevel(s); quieter {
		// The agent reads etcd's info lines (publishWatch) and passes on
		// only those at the spec's level.
		extra["log-level"] = "info"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		out = append(out, fmt.Sprintf("--%s=%s", k, extra[k]))
	}
	return out
}

// passLevel is the level of etcd's lines the agent passes through to its
// own log: the spec's etcd log-level (info by default). quieter is true
// when that is above info: etcd then still runs at info, since the agent
// watches etcd's info lines for the publish stall (see publishWatch), and
// the agent drops the lines below the spec's level.
func passLevel(s *spec.Spec) (level zapcore.Level, quieter bool) {
	v, ok := s.Etcd.Flags["log-level"]
	if !ok {
		v, ok = s.Etcd.Flags["--log-level"]
	}
	if !ok || level.UnmarshalText([]byte(v)) != nil {
		return zapcore.InfoLevel, false
	}
	return level, level > zapcore.InfoLevel
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
