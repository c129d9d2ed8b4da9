package kubeadm

import (
	"flag"
	"io"
	"sort"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
)

// memberFlags are the etcd flags a spec member expresses (name, URLs) or
// that etcdkeeper sets itself (data dir, bootstrap): ToSpec consumes them.
var memberFlags = map[string]bool{
	"name":                        true,
	"data-dir":                    true,
	"initial-cluster":             true,
	"initial-cluster-state":       true,
	"initial-cluster-token":       true,
	"initial-advertise-peer-urls": true,
	"advertise-client-urls":       true,
	"listen-peer-urls":            true,
	"listen-client-urls":          true,
}

// tlsFlags are the etcd flags the spec's tls: section expresses.
var tlsFlags = map[string]bool{
	"cert-file":             true,
	"key-file":              true,
	"trusted-ca-file":       true,
	"client-cert-auth":      true,
	"peer-cert-file":        true,
	"peer-key-file":         true,
	"peer-trusted-ca-file":  true,
	"peer-client-cert-auth": true,
}

// refusedFlags are flags the spec cannot carry, with what the operator
// must do about them.
var refusedFlags = map[string]string{
	"wal-dir": "etcdkeeper keeps the WAL inside the data dir (repair moves the data dir as a whole): " +
		"with etcd stopped, move the WAL to <data dir>/member/wal before etcdkeeper starts this member",
	"config-file": "etcdkeeper passes every setting as a flag; etcd ignores all flags when --config-file is set: " +
		"copy the file's settings into etcd.flags",
}

// renamedFlag is the flag etcd v3.7 takes instead of an --experimental-*
// one that is not a feature gate: etcd v3.6 dropped the prefix (its
// experimentalFlagMigrationMap: --experimental-watch-progress-notify-interval
// became --watch-progress-notify-interval, and so on), and v3.7 accepts only
// the new name. ok is false for other flags, and when etcd has no such
// flag.
func renamedFlag(name string) (to string, ok bool) {
	to, experimental := strings.CutPrefix(name, "experimental-")
	return to, experimental && etcdFlags()[to]
}

// gateFlags are etcd's boolean --experimental-* flags that became feature
// gates in etcd v3.6 (etcd's features.ExperimentalFlagToFeatureMap).
var gateFlags = map[string]string{
	"experimental-stop-grpc-service-on-defrag":       "StopGRPCServiceOnDefrag",
	"experimental-initial-corrupt-check":             "InitialCorruptCheck",
	"experimental-compact-hash-check-enabled":        "CompactHashCheck",
	"experimental-txn-mode-write-with-shared-buffer": "TxnModeWriteWithSharedBuffer",
	"experimental-enable-lease-checkpoint":           "LeaseCheckpoint",
	"experimental-enable-lease-checkpoint-persist":   "LeaseCheckpointPersist",
}

// keeperGates are the feature gates etcdkeeper turns on when etcd.flags sets
// no feature-gates (internal/etcdproc's defaults; a test keeps the two
// equal). A feature-gates flag in etcd.flags replaces them, so a spec that
// sets one must repeat them.
var keeperGates = map[string]bool{
	"InitialCorruptCheck":     true,
	"CompactHashCheck":        true,
	"StopGRPCServiceOnDefrag": true,
}

// etcdVersion is the embedded etcd's minor version, e.g. "v3.7", the etcd
// the flags are checked against.
var etcdVersion = func() string {
	parts := strings.SplitN(version.Version, ".", 3)
	return "v" + strings.Join(parts[:min(2, len(parts))], ".")
}()

// etcdFlags is the set of flags the embedded etcd accepts, taken from etcd
// itself rather than from a list that would go stale.
var etcdFlags = sync.OnceValue(func() map[string]bool {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	embed.NewConfig().AddFlags(fs)
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
	// Flags etcdmain adds to embed's.
	for _, name := range []string{"config-file", "discovery-fallback", "initial-cluster-state", "v2-deprecation", "version"} {
		known[name] = true
	}
	return known
})

// parseGates reads a --feature-gates value, Name=bool,...
func parseGates(v string) map[string]bool {
	gates := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if name != "" {
			gates[name] = strings.EqualFold(strings.TrimSpace(value), "true")
		}
	}
	return gates
}

// formatGates writes gates the way --feature-gates takes them, sorted.
func formatGates(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for name := range gates {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + map[bool]string{true: "true", false: "false"}[gates[name]]
	}
	return strings.Join(parts, ",")
}

func isTrue(v string) bool { return strings.EqualFold(v, "true") }
