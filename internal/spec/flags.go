package spec

//go:generate go run gen_etcdflags.go

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ownedFlags are etcd flags the agent derives from the spec; setting them
// in etcd.flags would contradict the spec, so each maps to what to do.
var ownedFlags = map[string]string{
	"name":                        "",
	"data-dir":                    "",
	"initial-cluster":             "",
	"initial-cluster-state":       "",
	"initial-cluster-token":       "",
	"initial-advertise-peer-urls": "",
	"advertise-client-urls":       "",
	"listen-peer-urls":            "",
	"listen-client-urls":          "",
	// Repair moves the data dir aside as a whole; a WAL elsewhere would
	// be left behind and replayed into the fresh member.
	"wal-dir": "remove it: the WAL must stay inside the data dir so that repair moves it with the data",
	// etcd ignores every command-line flag when a config file is given,
	// which would silently drop all the flags above.
	"config-file": "remove it: etcd ignores all other flags when --config-file is set",
	// TLS comes from tls:, where the files are checked and the agent finds
	// the certificates it needs to talk to etcd.
	"cert-file":             "remove it: set tls.client.certFile",
	"key-file":              "remove it: set tls.client.keyFile",
	"trusted-ca-file":       "remove it: set tls.client.trustedCAFile",
	"client-cert-auth":      "remove it: set tls.client.clientCertAuth",
	"peer-cert-file":        "remove it: set tls.peer.certFile",
	"peer-key-file":         "remove it: set tls.peer.keyFile",
	"peer-trusted-ca-file":  "remove it: set tls.peer.trustedCAFile",
	"peer-client-cert-auth": "remove it: set tls.peer.clientCertAuth",
}

// dangerousFlags are etcd flags that no shared spec may set: every member
// would get them, and each one can lose data or fork the cluster.
var dangerousFlags = map[string]string{
	"force-new-cluster": "remove it: --force-new-cluster makes each member that starts with it a one-member cluster of its own; " +
		"recover a lost quorum with `etcdkeeper recover` (it restarts one member that way, once, and rejoins the others), never from the spec",
	"unsafe-no-fsync": "remove it: --unsafe-no-fsync loses acknowledged writes on a power cut and leaves WAL and db damaged, " +
		"which etcdkeeper would then repair again and again",
	"version": "remove it: etcd prints its version and exits instead of serving",
}

// discoveryHint: etcd bootstraps from --initial-cluster, from discovery
// (--discovery-endpoints, --discovery-srv, v2's --discovery) or from DNS,
// and refuses more than one ("multiple discovery or bootstrap flags are
// set"); the agent always passes --initial-cluster.
const discoveryHint = "remove it: etcdkeeper bootstraps the cluster from the spec's members (--initial-cluster); " +
	"etcd's discovery would bootstrap another one, and etcd refuses both at once"

// strictReconfigHint: without the check etcd accepts a membership change
// that leaves the cluster without a quorum of started members.
const strictReconfigHint = "must stay true (etcd's default): without it etcd accepts membership changes that lose quorum: remove it"

var flagName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// flags reads etcd.flags. Keys are stored without leading dashes, the way
// etcd's flag names are written in its docs.
func (d *doc) flags(dst *map[string]string) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.wrongShape(n, path, "a mapping of flag: value")
			return
		}
		*dst = map[string]string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.flag(path, n.Content[i], n.Content[i+1], *dst)
		}
	}
}

func (d *doc) flag(path string, k, v *yaml.Node, dst map[string]string) {
	k = resolve(k)
	if k == nil || k.Kind != yaml.ScalarNode {
		d.errorf(keyLine(k, v), "%s: keys must be flag names such as snapshot-count", path)
		return
	}
	name := strings.TrimLeft(k.Value, "-")
	p := join(path, name)
	if first, dup := d.lines[p]; dup {
		d.errorf(k.Line, "%s: flag set twice, first at line %d: keep one", p, first)
		return
	}
	d.lines[p] = k.Line
	val := resolve(v)
	if isNull(val) || val.Kind != yaml.ScalarNode {
		d.errorf(v.Line, "%s: needs one value, found %s: write true for a switch, \"\" for empty, and join lists with commas", p, describe(val))
		return
	}
	dst[name] = val.Value
}

// checkFlags checks etcd.flags. Whether etcd knows a flag is checked only
// for the etcd built into etcdkeeper: an external etcd.binary may be
// another version, with other flags (it refuses unknown ones at start,
// which the agent classifies as misconfiguration and never repairs).
func (d *doc) checkFlags(s *Spec) {
	d.checkFlagMap("etcd.flags", s.Etcd.Flags, s.Etcd.Binary == "")
	for i, m := range s.Members {
		d.checkFlagMap(memberPath(i)+".flags", m.Flags, s.Etcd.Binary == "")
	}
}

// checkFlagMap checks one flags mapping, etcd.flags or a member's.
func (d *doc) checkFlagMap(path string, flags map[string]string, builtin bool) {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		p := join(path, name)
		if msg := flagProblem(name, flags[name], builtin); msg != "" {
			d.errorf(d.line(p), "%s: %s", p, msg)
		}
	}
}

// DangerousFlag says why etcd flag name (without dashes) must never be
// in a spec, and what to do, for the flags that lose data or fork the
// cluster; ok is false for other flags.
func DangerousFlag(name string) (why string, ok bool) {
	why, ok = dangerousFlags[name]
	return why, ok
}

// flagProblem says what is wrong with flag name=value and what to do, or
// "". builtin: the etcd is the one built into etcdkeeper, whose flags
// etcdFlags lists.
func flagProblem(name, value string, builtin bool) string {
	if !flagName.MatchString(name) {
		return "not an etcd flag name: use lowercase letters, digits and dashes, e.g. snapshot-count"
	}
	if reason, owned := ownedFlags[name]; owned {
		if reason != "" {
			return reason
		}
		return "remove it: etcdkeeper sets --" + name + " from the spec"
	}
	if reason, ok := dangerousFlags[name]; ok {
		return reason
	}
	if name == "discovery" || strings.HasPrefix(name, "discovery-") {
		return discoveryHint
	}
	if on, err := strconv.ParseBool(value); name == "strict-reconfig-check" && (err != nil || !on) {
		return fmt.Sprintf("%q: %s", value, strictReconfigHint)
	}
	if builtin {
		return unknownFlag(name)
	}
	return ""
}

// unknownFlag: etcd refuses a flag it does not define, and quietly ignores
// a few old ones (etcdIgnoredFlags).
func unknownFlag(name string) string {
	switch {
	case etcdFlags[name]:
		return ""
	case etcdIgnoredFlags[name]:
		return fmt.Sprintf("remove it: etcd %s accepts --%s but ignores it", etcdVersion, name)
	}
	if to, ok := strings.CutPrefix(name, "experimental-"); ok {
		if etcdFlags[to] {
			return fmt.Sprintf("not a flag of etcd %s, which dropped the experimental- prefix: write %s", etcdVersion, to)
		}
		return fmt.Sprintf("not a flag of etcd %s, which removed the --experimental-* flags: some are feature gates now "+
			"(feature-gates, e.g. InitialCorruptCheck=true,CompactHashCheck=true)", etcdVersion)
	}
	msg := fmt.Sprintf("not a flag of etcd %s (the etcd built into etcdkeeper; etcdkeeper etcd --help lists them)", etcdVersion)
	if near := nearestFlag(name); near != "" {
		msg += ": did you mean " + near + "?"
	}
	return msg
}

// nearestFlag is the etcd flag one or two edits away from name, or "".
func nearestFlag(name string) string {
	best, bestDist := "", 3
	for f := range etcdFlags {
		if d := editDistance(name, f); d < bestDist || (d == bestDist && f < best) {
			best, bestDist = f, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
