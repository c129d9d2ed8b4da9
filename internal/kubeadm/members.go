package kubeadm

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// defaultClientPort is the client port kubeadm gives every member.
const defaultClientPort = "2379"

// peerList is one manifest's --initial-cluster: member name -> peer URLs.
type peerList struct {
	from  Manifest
	peers map[string][]string
}

// members builds one spec member per host: from its own manifest when
// given, else from the --initial-cluster of the manifests that name it.
func (b *builder) members() error {
	own := map[string]Manifest{}
	var lists []peerList
	for _, m := range b.ms {
		own[m.Name()] = m
		ic, _ := m.Flag("initial-cluster")
		peers, err := parseInitialCluster(ic)
		if err != nil {
			return fmt.Errorf("%s: --initial-cluster: %w", m.label(), err)
		}
		lists = append(lists, peerList{from: m, peers: peers})
	}
	if b.live != nil {
		return b.liveMembers(lists)
	}
	if err := byPeerURL(own, lists); err != nil {
		return err
	}
	var derived []string
	for _, name := range memberNames(own, lists) {
		if m, ok := own[name]; ok {
			mb, err := b.ownMember(m, lists)
			if err != nil {
				return err
			}
			b.doc.Members = append(b.doc.Members, mb)
			continue
		}
		b.doc.Members = append(b.doc.Members, b.listedMember(name, lists))
		derived = append(derived, name)
	}
	if len(derived) > 0 {
		b.warn("no manifest of %s: their clientURLs and listenClientURLs are derived (see the members); "+
			"import every control-plane host's manifest, or check them against each host's /etc/kubernetes/manifests/etcd.yaml",
			strings.Join(derived, ", "))
	}
	return nil
}

// memberID matches the name kubeadm writes in --initial-cluster for a
// member that had not started yet (etcd knew no name for it): its member
// ID in hex.
var memberID = regexp.MustCompile(`^[0-9a-f]{1,16}$`)

// byPeerURL renames the --initial-cluster entries named by a member ID to
// the member with the same peer URLs, known by name from a manifest or
// another --initial-cluster. One that matches none is an error: its name
// is unknown, and the agents must not run a member under a made-up one.
func byPeerURL(own map[string]Manifest, lists []peerList) error {
	named := map[string]string{} // peer URLs -> name
	for _, l := range lists {
		for name, urls := range l.peers {
			if _, ok := own[name]; ok || !memberID.MatchString(name) {
				named[strings.Join(urls, ",")] = name
			}
		}
	}
	for name, m := range own {
		named[strings.Join(flagList(m, "initial-advertise-peer-urls"), ",")] = name
	}
	for _, l := range lists {
		for id, urls := range l.peers {
			if _, ok := own[id]; ok || !memberID.MatchString(id) {
				continue
			}
			name, ok := named[strings.Join(urls, ",")]
			if !ok {
				return fmt.Errorf("%s: --initial-cluster names a member %s=%s: a member ID, as kubeadm writes for a member that had not started yet; "+
					"no manifest names the member at %s: import the manifest of that host too", l.from.label(), id, strings.Join(urls, ","), strings.Join(urls, ","))
			}
			delete(l.peers, id)
			if _, dup := l.peers[name]; !dup {
				l.peers[name] = urls
			}
		}
	}
	return nil
}

// memberNames is every member a manifest names, itself or in its
// --initial-cluster, sorted.
func memberNames(own map[string]Manifest, lists []peerList) []string {
	seen := map[string]bool{}
	var names []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for name := range own {
		add(name)
	}
	for _, l := range lists {
		for name := range l.peers {
			add(name)
		}
	}
	sort.Strings(names)
	return names
}

// parseInitialCluster reads name=peerURL,...; a name may come more than once
// when its member has several peer URLs.
func parseInitialCluster(v string) (map[string][]string, error) {
	peers := map[string][]string{}
	if v == "" {
		return peers, nil
	}
	for _, pair := range strings.Split(v, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("%q is not name=peerURL", pair)
		}
		peers[name] = append(peers[name], u)
	}
	return peers, nil
}

// ownMember is the member of the host whose manifest this is: its own flags
// say how it is reached and what it binds. The listen URLs are kubeadm's as
// they are (127.0.0.1 and the host's address): the spec accepts 127.0.0.1
// on every member when their peer URLs name different hosts.
func (b *builder) ownMember(m Manifest, lists []peerList) (Member, error) {
	mb := Member{Name: m.Name(), Note: "From " + m.label() + "."}
	mb.PeerURLs = flagList(m, "initial-advertise-peer-urls")
	if len(mb.PeerURLs) == 0 {
		own, _ := parseInitialCluster(flagValue(m, "initial-cluster"))
		mb.PeerURLs = own[mb.Name]
	}
	if len(mb.PeerURLs) == 0 {
		return Member{}, fmt.Errorf("%s: no --initial-advertise-peer-urls and no entry for %s in --initial-cluster: import needs the member's peer URLs", m.label(), mb.Name)
	}
	for _, l := range lists {
		if urls, ok := l.peers[mb.Name]; ok && strings.Join(urls, ",") != strings.Join(mb.PeerURLs, ",") {
			mb.Note += fmt.Sprintf(" %s lists it with %s: etcd uses --initial-cluster only at a member's first start, so its own flag is taken.",
				l.from.label(), strings.Join(urls, ","))
		}
	}
	mb.ClientURLs = flagList(m, "advertise-client-urls")
	if len(mb.ClientURLs) == 0 {
		mb.ClientURLs = clientURLsFor(mb.PeerURLs)
		mb.Note += " It sets no --advertise-client-urls: clientURLs is its peer host with port " + defaultClientPort + "."
	}
	mb.ListenPeerURLs = flagList(m, "listen-peer-urls")
	mb.ListenClientURLs = flagList(m, "listen-client-urls")
	return mb, nil
}

// listedMember is a member only other hosts' --initial-cluster names. Its
// client URLs are guessed the kubeadm way: the peer URL's host, port 2379,
// listening there and on loopback.
func (b *builder) listedMember(name string, lists []peerList) Member {
	var first peerList
	var by []string
	for _, l := range lists {
		if _, ok := l.peers[name]; ok {
			if len(by) == 0 {
				first = l
			}
			by = append(by, l.from.Name())
		}
	}
	mb := Member{Name: name, PeerURLs: first.peers[name]}
	mb.ClientURLs = clientURLsFor(mb.PeerURLs)
	mb.ListenClientURLs = kubeadmListenFor(mb.PeerURLs[0])
	mb.Note = fmt.Sprintf("No manifest of %s: named in the --initial-cluster of %s. "+
		"clientURLs is its peer host with port %s, ",
		name, strings.Join(by, ", "), defaultClientPort)
	if len(mb.ListenClientURLs) > 0 {
		mb.Note += "and listenClientURLs assumes kubeadm's layout (loopback and its own address), as on the other hosts."
	} else {
		mb.Note += "and its peer host is not an IP, so listenClientURLs is left to the spec's default (0.0.0.0, which covers 127.0.0.1)."
	}
	for _, l := range lists {
		if urls, ok := l.peers[name]; ok && strings.Join(urls, ",") != strings.Join(mb.PeerURLs, ",") {
			b.warn("%s: %s lists its peer URLs as %s, %s as %s: took the first; check them with etcdctl member list",
				name, first.from.label(), strings.Join(mb.PeerURLs, ","), l.from.label(), strings.Join(urls, ","))
		}
	}
	return mb
}

// kubeadmListenFor is the --listen-client-urls kubeadm writes for a member
// with this peer URL: loopback of the address's family, then the address,
// both on port 2379. Nil when the peer host is not an IP (etcd binds IPs
// only).
func kubeadmListenFor(peerURL string) []string {
	u, ip := ipURL(peerURL)
	if ip == nil {
		return nil
	}
	loopback := loopbackLike(ip)
	return []string{
		u.Scheme + "://" + net.JoinHostPort(loopback, defaultClientPort),
		u.Scheme + "://" + net.JoinHostPort(u.Hostname(), defaultClientPort),
	}
}

// clientURLsFor derives client URLs from peer URLs: same scheme and host,
// port 2379.
func clientURLsFor(peerURLs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range peerURLs {
		u, err := url.Parse(p)
		if err != nil {
			continue
		}
		c := u.Scheme + "://" + net.JoinHostPort(u.Hostname(), defaultClientPort)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// flagList splits a comma-separated flag value.
func flagList(m Manifest, name string) []string {
	v := flagValue(m, name)
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func flagValue(m Manifest, name string) string {
	v, _ := m.Flag(name)
	return v
}

// ipURL parses a URL whose host is an IP; ip is nil when it is not one.
func ipURL(s string) (*url.URL, net.IP) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, nil
	}
	return u, net.ParseIP(u.Hostname())
}

// loopbackLike is the loopback address of ip's family.
func loopbackLike(ip net.IP) string {
	if ip.To4() == nil {
		return "::1"
	}
	return "127.0.0.1"
}
