package kubeadm

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
)

// Cluster is the live member list, read from a running member (`etcdctl
// member list`): with it, the spec's members are exactly the cluster's,
// whatever the manifests' --initial-cluster says.
type Cluster struct {
	// Endpoint is where the list was read, for comments and errors.
	Endpoint string
	// ID is the cluster ID.
	ID      uint64
	Members []ClusterMember
}

// ClusterMember is one member as the cluster lists it.
type ClusterMember struct {
	ID uint64
	// Name is empty for a member that was added but has not started yet:
	// etcd learns the name when the member first joins.
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// ToSpecLive is ToSpec with the cluster's member list: the spec lists
// every member the cluster lists, each host's own manifest is still
// authoritative for its member, and a member with no manifest at hand
// gets the name, peer URLs and client URLs the cluster reports. A manifest
// whose member the cluster does not list is an error, as are a learner (a
// join in progress) and a member that has not started with no manifest
// (the cluster knows neither its name nor its client URLs).
func ToSpecLive(ms []Manifest, live Cluster, pki PKI) (Document, error) {
	if len(live.Members) == 0 {
		return Document{}, fmt.Errorf("%s: the cluster lists no members", live.Endpoint)
	}
	return toSpec(ms, &live, pki)
}

// liveMembers builds one spec member per member of the live cluster: from
// its host's manifest when given, else from what the cluster reports.
func (b *builder) liveMembers(lists []peerList) error {
	live := b.live
	names := make([]string, len(live.Members)) // the spec name of each
	own := make([]*Manifest, len(live.Members))
	for _, lm := range live.Members {
		if lm.IsLearner {
			return fmt.Errorf("%s: member %s (%x, %s) is a learner: a member is being added (kubeadm join): import again when `etcdctl member list` shows it started and no longer a learner",
				live.Endpoint, cmpName(lm), lm.ID, strings.Join(lm.PeerURLs, ","))
		}
	}
	for i := range b.ms {
		m := &b.ms[i]
		peers := ownPeerURLs(*m)
		at := slices.IndexFunc(live.Members, func(lm ClusterMember) bool { return lm.Name == m.Name() })
		if at < 0 {
			// Not started yet: etcd knows it by its peer URLs only.
			at = slices.IndexFunc(live.Members, func(lm ClusterMember) bool {
				return lm.Name == "" && sameURLs(lm.PeerURLs, peers)
			})
		}
		if at < 0 {
			return atSource(m, fmt.Errorf("member %s (peer URLs %s) is not in the cluster's member list (read from %s: %s): "+
				"it was removed, or the manifest is of another cluster; leave this manifest out, or check `etcdctl member list`",
				m.Name(), strings.Join(peers, ","), live.Endpoint, listed(live.Members)))
		}
		lm := live.Members[at]
		if !sameURLs(lm.PeerURLs, peers) {
			return atSource(m, fmt.Errorf("member %s: the cluster lists its peer URLs as %s, its manifest as %s (--initial-advertise-peer-urls, which etcd reads only at a member's first start): "+
				"make them agree (etcdctl member update, or fix the manifest), then import again",
				m.Name(), strings.Join(lm.PeerURLs, ","), strings.Join(peers, ",")))
		}
		if own[at] != nil {
			return fmt.Errorf("%s and %s: both are manifests of member %x: give each host's manifest once", own[at].label(), m.label(), lm.ID)
		}
		names[at], own[at] = m.Name(), m
	}
	for i, lm := range live.Members {
		if own[i] != nil {
			continue
		}
		if lm.Name == "" {
			return fmt.Errorf("%s: member %x (peer URLs %s) has not started yet: the cluster knows neither its name nor its client URLs, and no manifest has these peer URLs: "+
				"import that host's manifest too (--manifest), or start it first",
				live.Endpoint, lm.ID, strings.Join(lm.PeerURLs, ","))
		}
		names[i] = lm.Name
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return fmt.Errorf("%s: two members are named %s (%s): the spec names each member once; rename one (its --name) first", live.Endpoint, n, listed(live.Members))
		}
		seen[n] = true
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, c int) bool { return names[order[a]] < names[order[c]] })
	var fromCluster []string
	for _, i := range order {
		lm := live.Members[i]
		if m := own[i]; m != nil {
			mb, err := b.ownMember(*m, lists)
			if err != nil {
				return err
			}
			mb.Note += fmt.Sprintf(" The cluster lists it as member %x", lm.ID)
			if lm.Name == "" {
				mb.Note += ", not started yet (etcd learns its name when it starts)"
			}
			mb.Note += "."
			if len(lm.ClientURLs) > 0 && !sameURLs(lm.ClientURLs, mb.ClientURLs) {
				b.warn("%s: its manifest advertises client URLs %s, the cluster lists %s: took the manifest's, with which etcd starts on that host; check that the pod runs its manifest",
					mb.Name, strings.Join(mb.ClientURLs, ","), strings.Join(lm.ClientURLs, ","))
			}
			b.doc.Members = append(b.doc.Members, mb)
			continue
		}
		b.doc.Members = append(b.doc.Members, b.clusterMember(lm))
		fromCluster = append(fromCluster, lm.Name)
	}
	b.doc.FromCluster = fromCluster
	if len(fromCluster) > 0 {
		b.warn("no manifest of %s: name, peerURLs and clientURLs are the cluster's member list's (read from %s); listenClientURLs assumes kubeadm's layout, "+
			"and their data dir and etcd flags are those of the hosts whose manifests were given: check them against each host's /etc/kubernetes/manifests/etcd.yaml",
			strings.Join(fromCluster, ", "), live.Endpoint)
	}
	b.staleInitialCluster(lists, seen)
	return nil
}

// clusterMember is a member known only from the cluster's member list.
func (b *builder) clusterMember(lm ClusterMember) Member {
	mb := Member{Name: lm.Name, PeerURLs: lm.PeerURLs, ClientURLs: lm.ClientURLs}
	mb.Note = fmt.Sprintf("From the cluster's member list (member %x, read from %s), not from a manifest: no manifest of %s is at hand. "+
		"name, peerURLs and clientURLs are as the cluster lists them, ", lm.ID, b.live.Endpoint, lm.Name)
	if len(mb.ClientURLs) == 0 {
		mb.ClientURLs = clientURLsFor(mb.PeerURLs)
		mb.Note += "but it advertises no client URLs: clientURLs is its peer host with port " + defaultClientPort + ", "
	}
	mb.ListenClientURLs = kubeadmListen(mb.ClientURLs)
	if len(mb.ListenClientURLs) > 0 {
		mb.Note += "and listenClientURLs assumes kubeadm's layout (loopback and its own address), as on the other hosts."
	} else {
		mb.Note += "and its client host is not an IP, so listenClientURLs is left to the spec's default (0.0.0.0, which covers 127.0.0.1)."
	}
	return mb
}

// staleInitialCluster warns about members a manifest's --initial-cluster
// names that the cluster no longer lists: left out of the spec.
func (b *builder) staleInitialCluster(lists []peerList, members map[string]bool) {
	var stale []string
	for _, l := range lists {
		for _, name := range slices.Sorted(maps.Keys(l.peers)) {
			if members[name] || memberID.MatchString(name) {
				continue
			}
			stale = append(stale, fmt.Sprintf("%s (in %s)", name, l.from.label()))
		}
	}
	if len(stale) > 0 {
		b.warn("the --initial-cluster of the manifests names %s, which the cluster does not list (read from %s): removed since, so left out of members",
			strings.Join(stale, ", "), b.live.Endpoint)
	}
}

// kubeadmListen is the --listen-client-urls kubeadm writes for a member
// advertising clientURLs: loopback of the address's family on the same
// port, then the client URLs. Nil when a host is not an IP (etcd binds IPs
// only).
func kubeadmListen(clientURLs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, c := range clientURLs {
		u, ip := ipURL(c)
		if ip == nil {
			return nil
		}
		loopback := loopbackLike(ip)
		add(u.Scheme + "://" + net.JoinHostPort(loopback, u.Port()))
	}
	for _, c := range clientURLs {
		add(c)
	}
	return out
}

// ownPeerURLs are the peer URLs a host's manifest gives its member.
func ownPeerURLs(m Manifest) []string {
	if urls := flagList(m, "initial-advertise-peer-urls"); len(urls) > 0 {
		return urls
	}
	own, _ := parseInitialCluster(flagValue(m, "initial-cluster"))
	return own[m.Name()]
}

// sameURLs: the same URLs, in any order.
func sameURLs(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// listed is the member list in one line: name=peerURLs, "(not started)"
// for a member with no name yet.
func listed(ms []ClusterMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = cmpName(m) + "=" + strings.Join(m.PeerURLs, ",")
	}
	return strings.Join(parts, ", ")
}

func cmpName(m ClusterMember) string {
	if m.Name == "" {
		return fmt.Sprintf("%x (not started)", m.ID)
	}
	return m.Name
}

// atSource puts the manifest's source (file, or file:line) before err.
func atSource(m *Manifest, err error) error {
	return at(m.Source, 0, err)
}
