package etcdproc

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Bootstrap says how a member with an empty data dir forms or joins its
// cluster: etcd reads the bootstrap flags (--initial-cluster-token,
// --initial-cluster-state, --initial-cluster) only then, and ignores them
// once its data dir holds a member. Make one with NewCluster, AsIs or
// Join: each start mode is one constructor, so a call site says which it
// means.
type Bootstrap struct {
	// mode is the constructor that made it, for logs and for AsIs.
	mode string
	// state is "new" (form the cluster from the spec) or "existing" (join
	// a running cluster as a member that was added through the API).
	state string
	// initialCluster is name=peerURL,... For "existing" it must list
	// exactly the cluster's current members (voters, learners and this
	// one), or etcd refuses with "member count is unequal".
	initialCluster string
}

// The start modes, as Bootstrap.String names them.
const (
	modeNew   = "new"
	modeAsIs  = "as-is"
	modeJoin  = "join"
	modeForce = "force-new-cluster"
)

// NewCluster is the bootstrap of a cluster that has never run: the whole
// spec is the initial cluster, name=peerURL for every peer URL of every
// member, in spec order.
func NewCluster(s *spec.Spec) Bootstrap {
	var pairs []string
	for _, m := range s.Members {
		pairs = append(pairs, peerPairs(m.Name, m.PeerURLs)...)
	}
	return Bootstrap{mode: modeNew, state: "new", initialCluster: strings.Join(pairs, ",")}
}

// AsIs starts a member whose data dir already holds it: etcd takes the
// membership from the data dir and ignores the bootstrap flags. They are
// still rendered, as NewCluster's for the spec (see Bootstrap.flags): that
// is what the agent has always passed in this case, so a member restarted
// as-is gets the command line it always got. The values only matter if
// the data dir held no member after all, and then etcd would form a new
// cluster from the spec.
func AsIs() Bootstrap { return Bootstrap{mode: modeAsIs} }

// ForceNewCluster restarts a member from its own data dir as a
// one-member cluster: etcd's --force-new-cluster commits a configuration
// change that drops every other member and learner, and keeps this
// member's ID, the cluster ID and every key. Only a recovery from quorum
// loss starts etcd this way (recover --from), and only until the member
// serves as the leader of its one-member cluster; the bootstrap flags are
// AsIs's.
func ForceNewCluster() Bootstrap { return Bootstrap{mode: modeForce} }

// Join is the bootstrap of a member that was added through the API as
// newID and now starts with an empty data dir: state existing, and
// --initial-cluster is every current member, itself under its own name
// (self). etcd matches the other entries by peer URL only, but needs a
// distinct name per entry, so an unstarted member gets a placeholder.
// members is the list etcd returned when adding newID, or the one the
// agent observed when it takes over an unstarted entry.
func Join(members []model.Member, newID uint64, self string) Bootstrap {
	var pairs []string
	for _, m := range members {
		name := m.Name
		if m.ID == newID {
			name = self
		} else if m.Unstarted() {
			name = fmt.Sprintf("unstarted-%x", m.ID)
		}
		pairs = append(pairs, peerPairs(name, m.PeerURLs)...)
	}
	sort.Strings(pairs)
	return Bootstrap{mode: modeJoin, state: "existing", initialCluster: strings.Join(pairs, ",")}
}

// peerPairs are --initial-cluster's name=peerURL entries of one member.
func peerPairs(name string, peerURLs []string) []string {
	out := make([]string, 0, len(peerURLs))
	for _, u := range peerURLs {
		out = append(out, name+"="+u)
	}
	return out
}

// String names the start mode and, but for as-is, its bootstrap values:
// what the agent logs when it starts etcd.
func (b Bootstrap) String() string {
	if b.mode == modeAsIs || b.mode == modeForce {
		return b.mode
	}
	return fmt.Sprintf("%s (--initial-cluster-state=%s --initial-cluster=%s)", b.mode, b.state, b.initialCluster)
}

// flags are the bootstrap flags. The cluster name is the token: etcd
// derives the new cluster's member and cluster IDs from it, which keeps
// two clusters with the same peer URLs apart.
func (b Bootstrap) flags(s *spec.Spec) []string {
	var force []string
	if b.mode == modeForce {
		force = []string{"--force-new-cluster"}
	}
	if b.mode == modeAsIs || b.mode == modeForce {
		b = NewCluster(s)
	}
	return append([]string{
		"--initial-cluster-token=" + s.Cluster.Name,
		"--initial-cluster-state=" + b.state,
		"--initial-cluster=" + b.initialCluster,
	}, force...)
}

// Settings is the part of etcd's command line that a running etcd must
// match: everything except the bootstrap flags, which etcd ignores once
// its data dir holds a member. When the spec changes it, the member must
// restart; a member added to the spec changes only the bootstrap flags and
// restarts nobody.
//
// It ends with a fingerprint of the contents of etcd's trusted CA files
// (--trusted-ca-file, --peer-trusted-ca-file): etcd reads them only when
// it starts, so new contents there (a CA rotation) are a settings change
// too, applied by the same restart, one member at a time under the lock.
// etcd's own certificates and keys (--cert-file, --peer-cert-file, ...)
// are not in it: etcd reads them again at every TLS handshake, on both
// ports and for its connections to peers, so a renewal needs no restart.
func Settings(s *spec.Spec, m spec.Member) string {
	flags := slices.Concat(memberFlags(m), tlsFlags(m.TLS), extraFlags(s, m))
	if cas := caFiles(m.TLS); len(cas) > 0 {
		flags = append(flags, "(ca-files "+certs.Fingerprint(cas)+")")
	}
	return strings.Join(flags, " ")
}

// caFiles are the trusted CA files etcd reads at start, each once.
func caFiles(t spec.TLS) []string {
	var out []string
	for _, f := range []string{t.Client.TrustedCAFile, t.Peer.TrustedCAFile} {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// CommandFor is the whole command that starts member m's etcd: the etcd
// built into the agent's binary (self, run as "self etcd --flags...")
// unless the spec names an external binary. env is the agent's
// environment; the child gets it without systemd's variables (ChildEnv).
func CommandFor(s *spec.Spec, m spec.Member, b Bootstrap, self string, env []string) Command {
	cmd := Command{Path: self, Args: append([]string{"etcd"}, Flags(s, m, b)...), Env: ChildEnv(env)}
	cmd.PassLevel, _ = passLevel(s)
	if s.Etcd.Binary != "" {
		cmd.Path, cmd.Args = s.Etcd.Binary, cmd.Args[1:]
		return cmd
	}
	// etcdkeeper's own etcd watches its lifeline, and can outlive an
	// exec of the agent onto a new binary (Handoff).
	cmd.Lifeline = true
	return cmd
}
