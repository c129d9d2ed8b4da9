package kubeadm

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Document is the spec ToSpec builds, with a note on every value that did
// not come straight from a manifest flag. Render writes it as a spec file.
type Document struct {
	// Sources names the manifests, one line each, sorted by member name.
	Sources []string
	// Warnings are what the operator must check or do before any agent
	// runs the spec. Render lists them in the file's header.
	Warnings []string

	ClusterName string
	ClusterNote string
	// Members are sorted by name, so that the same hosts give the same
	// file whatever order their manifests were given in.
	Members []Member
	// FromCluster names the members that come from the cluster's member
	// list (ToSpecLive), not from a manifest.
	FromCluster []string
	// DataDir is etcd.dataDir: kubeadm's --data-dir as it is, the same
	// path on every host.
	DataDir     string
	DataDirNote string
	// Flags are etcd.flags, sorted by name.
	Flags []NotedFlag
	// Dropped says, per flag, why a manifest flag is not in Flags.
	Dropped []string
	TLS     spec.TLS
	// AgentNote explains where tls.agent comes from.
	AgentNote string
}

// Member is one spec member.
type Member struct {
	Name             string
	PeerURLs         []string
	ClientURLs       []string
	ListenPeerURLs   []string
	ListenClientURLs []string
	// DataDir is set when this member's differs from etcd.dataDir.
	DataDir string
	// Flags are the member's own etcd flags, sorted by name: those that
	// differ between hosts or name the host's own address.
	Flags []NotedFlag
	// Note says where the member comes from.
	Note string
}

// NotedFlag is an etcd.flags entry; Note says why it differs from the
// manifest, if it does.
type NotedFlag struct {
	Flag
	Note string
}

// PKI is the client certificate the agent presents to etcd, and the CA it
// trusts.
type PKI struct {
	CertFile, KeyFile, TrustedCAFile string
	// CA is the etcd CA, whose key lets the agents renew the certificates
	// kubeadm stops renewing once etcd is external; Others are those of
	// them that are not etcd's own (kube-apiserver's client certificate).
	CA     spec.TLSCA
	Others []spec.TLSOther
}

// KubeadmPKI is kubeadm's layout of the etcd PKI in dir
// (/etc/kubernetes/pki/etcd): the agent uses the client certificate kubeadm
// made for etcd's health checks.
func KubeadmPKI(dir string) PKI {
	return PKI{
		CertFile:      path.Join(dir, "healthcheck-client.crt"),
		KeyFile:       path.Join(dir, "healthcheck-client.key"),
		TrustedCAFile: path.Join(dir, "ca.crt"),
		CA:            spec.TLSCA{CertFile: path.Join(dir, "ca.crt"), KeyFile: path.Join(dir, "ca.key")},
		Others: []spec.TLSOther{{
			Name:     "apiserver-etcd-client",
			CertFile: path.Join(path.Dir(dir), "apiserver-etcd-client.crt"),
			KeyFile:  path.Join(path.Dir(dir), "apiserver-etcd-client.key"),
		}},
	}
}

// DefaultPKIDir is kubeadm's etcd PKI dir.
const DefaultPKIDir = "/etc/kubernetes/pki/etcd"

// PKIDirOf is where the manifests keep etcd's certificates: the host
// directory of the first one's --cert-file (sorted by member name), which
// is where kubeadm also puts healthcheck-client.{crt,key}; DefaultPKIDir
// when none sets it.
func PKIDirOf(ms []Manifest) string {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b Manifest) int { return strings.Compare(a.Name(), b.Name()) })
	for _, m := range ms {
		if f, ok := m.Flag("cert-file"); ok && f != "" {
			hp, _ := m.HostPath(f)
			return path.Dir(hp)
		}
	}
	return DefaultPKIDir
}

// DefaultClusterName is the cluster name when kubeadm set no
// --initial-cluster-token (kubeadm never does).
const DefaultClusterName = "kubernetes"

// ToSpec merges the etcd manifests of one or more control-plane hosts into
// one spec. Each host's own manifest is authoritative for its member; a
// member named only in other hosts' --initial-cluster gets URLs derived
// from its peer URL, and a warning. Settings the spec holds once for every
// member (data dir, TLS, etcd flags) come from the first manifest that has
// them; manifests that disagree are named in warnings.
func ToSpec(ms []Manifest, pki PKI) (Document, error) {
	return toSpec(ms, nil, pki)
}

// toSpec is ToSpec, and ToSpecLive when live is not nil.
func toSpec(ms []Manifest, live *Cluster, pki PKI) (Document, error) {
	if len(ms) == 0 {
		return Document{}, errors.New("no manifest: give at least one etcd static pod manifest")
	}
	seen := map[string]string{}
	for _, m := range ms {
		if first, dup := seen[m.Name()]; dup {
			return Document{}, fmt.Errorf("member %s: two manifests (%s and %s): give each host's manifest once", m.Name(), first, m.Source)
		}
		seen[m.Name()] = m.Source
	}
	// Sorted by name, so that the same hosts give the same spec whatever
	// order their manifests come in, including which one "first" is.
	ms = slices.Clone(ms)
	for i := range ms {
		ms[i] = ms[i].indexed()
	}
	slices.SortFunc(ms, func(a, b Manifest) int { return strings.Compare(a.Name(), b.Name()) })
	b := &builder{ms: ms, live: live}
	for _, m := range ms {
		b.doc.Sources = append(b.doc.Sources, sourceLine(m))
	}
	if live != nil {
		b.doc.Sources = append(b.doc.Sources, fmt.Sprintf("the cluster's member list: %s (cluster ID %x)", live.Endpoint, live.ID))
		b.warn("members are the cluster's member list as it was at the import (read from %s): "+
			"the agents REMOVE members the spec does not list, so if a member is added or removed before the agents run, import again", live.Endpoint)
	} else {
		b.warn("members must list every member of the live cluster: compare them with `etcdctl member list`. " +
			"The agents REMOVE members the spec does not list. kubeadm's --initial-cluster names only the members " +
			"known when that host joined, so import the manifests of all control-plane hosts " +
			"(--manifest cp1.yaml --manifest cp2.yaml ...), or read the member list from the cluster (--from-cluster)")
	}
	b.cluster()
	b.version()
	if err := b.members(); err != nil {
		return Document{}, err
	}
	if err := b.dataDir(); err != nil {
		return Document{}, err
	}
	if err := b.flags(); err != nil {
		return Document{}, err
	}
	b.tls(pki)
	b.env()
	return b.doc, nil
}

type builder struct {
	ms []Manifest
	// live is the cluster's member list, when the import read it.
	live *Cluster
	doc  Document
}

func (b *builder) warn(format string, args ...any) {
	w := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(w, ".") {
		w += "."
	}
	b.doc.Warnings = append(b.doc.Warnings, w)
}

// shared is the value of a flag the spec holds once for every member: the
// first manifest's that sets it, after value maps it (e.g. to a host path).
// Manifests with another value, or none, are named in a warning.
func (b *builder) shared(name, specKey string, value func(Manifest, string) string) (string, Manifest, bool) {
	var first Manifest
	var v string
	found := false
	for _, m := range b.ms {
		if raw, ok := m.Flag(name); ok {
			first, v, found = m, value(m, raw), true
			break
		}
	}
	if !found {
		return "", Manifest{}, false
	}
	var differ []string
	for _, m := range b.ms {
		raw, ok := m.Flag(name)
		switch {
		case !ok:
			differ = append(differ, m.Name()+" sets none")
		case value(m, raw) != v:
			differ = append(differ, m.Name()+" has "+value(m, raw))
		}
	}
	if len(differ) > 0 {
		b.warn("--%s differs between hosts (%s); %s holds one value for every member: it has %s's, %s: check it",
			name, strings.Join(differ, ", "), specKey, first.Name(), v)
	}
	return v, first, true
}

func raw(_ Manifest, v string) string { return v }

func (b *builder) cluster() {
	token, m, ok := b.shared("initial-cluster-token", "cluster.name", raw)
	if ok && token != "" {
		b.doc.ClusterName = token
		b.doc.ClusterNote = "--initial-cluster-token of " + m.label() + "."
		return
	}
	b.doc.ClusterName = DefaultClusterName
	b.doc.ClusterNote = "kubeadm sets no --initial-cluster-token (etcd took its default, etcd-cluster). " +
		"The token only matters when a cluster is first formed, and this one exists, so the name is " +
		DefaultClusterName + ". It is also the prefix of etcdkeeper's keys in etcd " +
		"(/etcdkeeper/" + DefaultClusterName + "/): never change it once agents run it."
}

// imageVersion is the etcd minor version of a kubeadm etcd image's tag
// (registry.k8s.io/etcd:3.5.16-0 is "3.5"), "" when the tag says none.
var imageVersion = regexp.MustCompile(`:v?(3\.\d+)\.\d+`)

// version says what must happen first when the hosts run an etcd the
// embedded one cannot take over from: etcd moves one minor version at a
// time, and etcdkeeper runs v3.7.
func (b *builder) version() {
	by := map[string][]string{}
	image := map[string]string{}
	for _, m := range b.ms {
		if v := imageVersion.FindStringSubmatch(m.Image); v != nil && v[1] != "3.6" && v[1] != "3.7" {
			by[v[1]] = append(by[v[1]], m.Name())
			image[v[1]] = m.Image
		}
	}
	for _, v := range slices.Sorted(maps.Keys(by)) {
		b.warn("%s run etcd %s (%s): etcdkeeper runs etcd %s, and etcd moves one minor version at a time: upgrade the cluster to etcd 3.6 first "+
			"(docs/kubeadm.md, \"Before you start\"), or set etcd.binary to an etcd 3.6 binary",
			strings.Join(by[v], ", "), v, image[v], etcdVersion)
	}
}

// dataDir keeps kubeadm's --data-dir: each member goes on in place, with
// its data and member ID. The spec accepts one path on several members when
// their peer URLs name different hosts. etcd.dataDir is the first host's;
// a host whose data dir differs gets its own members[].dataDir.
func (b *builder) dataDir() error {
	toHost := b.hostPath("data-dir")
	dirs := map[string]bool{}
	for _, m := range b.ms {
		raw, _ := m.Flag("data-dir")
		if raw == "" {
			return fmt.Errorf("%s: no --data-dir: import needs the data dir to keep the member's data", m.label())
		}
		dir := toHost(m, raw)
		dirs[dir] = true
		if b.doc.DataDir == "" {
			b.doc.DataDir = dir
		} else if dir != b.doc.DataDir {
			b.member(m.Name()).DataDir = dir
		}
	}
	dir := b.doc.DataDir
	b.doc.DataDirNote = fmt.Sprintf("kubeadm's --data-dir=%s, kept as it is: on each host the member goes on "+
		"in place, with its data and member ID; nothing is moved. Every member has this path, each on its own host",
		dir)
	backups := path.Join(dir, spec.BackupSubdir)
	if len(dirs) > 1 {
		b.doc.DataDirNote += ", but for the members with their own dataDir (their --data-dir differs)"
		backups = path.Join("<dataDir>", spec.BackupSubdir)
	}
	b.doc.DataDirNote += fmt.Sprintf(".\nagent.backupDir is left empty: repair moves a broken member's data into %s, on the data disk.", backups)
	// The packaged unit makes only its StateDirectory= /var/lib/etcd
	// writable (ProtectSystem=strict).
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if d != "/var/lib/etcd" && !strings.HasPrefix(d, "/var/lib/etcd/") {
			b.warn("the packaged systemd unit can write only under /var/lib/etcd: add ReadWritePaths=%s in a drop-in "+
				"(docs/kubeadm.md)", d)
		}
	}
	return nil
}

// hostPath maps a path flag to the host through the manifest's volumes,
// warning about paths that no hostPath volume covers.
func (b *builder) hostPath(flag string) func(Manifest, string) string {
	warned := map[string]bool{}
	return func(m Manifest, p string) string {
		if p == "" {
			return ""
		}
		hp, ok := m.HostPath(p)
		if !ok && !warned[m.Name()] {
			warned[m.Name()] = true
			b.warn("--%s=%s in %s is on no hostPath volume (it is inside the container): check that %s exists on the host", flag, p, m.label(), p)
		}
		return hp
	}
}

func (b *builder) tls(pki PKI) {
	file := func(name, key string) string {
		v, _, _ := b.shared(name, key, b.hostPath(name))
		return v
	}
	on := func(name, key string) bool {
		v, _, _ := b.shared(name, key, raw)
		return isTrue(v)
	}
	b.doc.TLS = spec.TLS{
		Client: spec.TLSServer{
			CertFile:       file("cert-file", "tls.client.certFile"),
			KeyFile:        file("key-file", "tls.client.keyFile"),
			TrustedCAFile:  file("trusted-ca-file", "tls.client.trustedCAFile"),
			ClientCertAuth: on("client-cert-auth", "tls.client.clientCertAuth"),
		},
		Peer: spec.TLSServer{
			CertFile:       file("peer-cert-file", "tls.peer.certFile"),
			KeyFile:        file("peer-key-file", "tls.peer.keyFile"),
			TrustedCAFile:  file("peer-trusted-ca-file", "tls.peer.trustedCAFile"),
			ClientCertAuth: on("peer-client-cert-auth", "tls.peer.clientCertAuth"),
		},
		Agent: spec.TLSClient{CertFile: pki.CertFile, KeyFile: pki.KeyFile, TrustedCAFile: pki.TrustedCAFile},
		CA:    pki.CA,
		Renew: spec.TLSRenew{Others: pki.Others},
	}
	if pki.CertFile != "" {
		b.doc.AgentNote = "kubeadm's client certificate for etcd's health checks (healthcheck-client), " +
			"signed by the etcd CA. kubeadm turns no etcd auth on, so a certificate from that CA may do " +
			"what the agent does: read status, add and remove members."
	}
}

func (b *builder) env() {
	for _, m := range b.ms {
		if len(m.Env) > 0 {
			b.warn("%s sets %s in etcd's environment: etcd reads ETCD_* variables as flags, but import does not copy them: add what is still wanted to etcd.flags",
				m.label(), strings.Join(m.Env, ", "))
		}
	}
}

// allFlagNames lists every flag any manifest sets, sorted.
func (b *builder) allFlagNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, m := range b.ms {
		for _, f := range m.Flags {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// sourceLine names a manifest in the header: "cp1: /path/to/etcd.yaml".
func sourceLine(m Manifest) string {
	if m.Source == "" {
		return m.Name()
	}
	return m.Name() + ": " + m.Source
}
