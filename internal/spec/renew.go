package spec

import (
	"net/url"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
)

// Leaves lists the certificates the agent of member m keeps renewed: its
// etcd's client and peer certificates (naming the hosts of its URLs), its
// own agent certificate, and tls.renew.others, each that the spec names.
func (m Member) Leaves() []certs.Leaf {
	t := m.TLS
	var out []certs.Leaf
	add := func(role, cert, key string, urls []string) {
		if cert == "" || key == "" {
			return
		}
		for _, l := range out {
			if l.CertFile == cert {
				return // one file serves both ports: renewed once
			}
		}
		out = append(out, certs.Leaf{Role: role, CertFile: cert, KeyFile: key, Hosts: hostsOf(urls)})
	}
	add("client", t.Client.CertFile, t.Client.KeyFile, m.ClientURLs)
	add("peer", t.Peer.CertFile, t.Peer.KeyFile, m.PeerURLs)
	add("agent", t.Agent.CertFile, t.Agent.KeyFile, nil)
	for _, o := range t.Renew.Others {
		add(o.Name, o.CertFile, o.KeyFile, nil)
	}
	return out
}

// RenewCAs are the CAs the renewal reads: tls.ca, and tls.ca.next during
// a rotation.
func (t TLS) RenewCAs() []certs.CA {
	cas := []certs.CA{{CertFile: t.CA.CertFile, KeyFile: t.CA.KeyFile}}
	if t.CA.Next.CertFile != "" {
		cas = append(cas, certs.CA{CertFile: t.CA.Next.CertFile, KeyFile: t.CA.Next.KeyFile})
	}
	return cas
}

func hostsOf(urls []string) []string {
	var out []string
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			out = append(out, u.Hostname())
		}
	}
	return out
}
