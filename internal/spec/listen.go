package spec

import (
	"net"
	"net/url"
)

// endpoint is one address a member's host binds: a listen URL (written or
// derived) or the agent address.
type endpoint struct {
	ip, port string
	wildcard bool
	// path and line say where the address comes from, for the message.
	path string
	line int
	// agent marks the agent address: its loopback default is shared by
	// every member, each on its own host.
	agent bool
	// advertised is the advertised list and URL it was derived from, ""
	// if written.
	advertised string
}

func (e endpoint) hostPort() string { return net.JoinHostPort(e.ip, e.port) }

// clashes: binding a wildcard takes the port on every IP.
func (e endpoint) clashes(o endpoint) bool {
	return e.port == o.port && (e.ip == o.ip || e.wildcard || o.wildcard)
}

// checkListen reports addresses that etcd or the agent could not bind:
// two binds on one member, or one specific IP:port on two members (an IP
// belongs to one host). Wildcards on different members are fine: those
// are different hosts, or one host that only the operator knows about.
func (d *doc) checkListen(s *Spec) {
	type owner struct {
		member string
		m      Member
		e      endpoint
	}
	first := map[string]owner{}
	for i, m := range s.Members {
		p := memberPath(i)
		if d.broken[p] {
			continue
		}
		eps := d.endpoints(p, m)
		d.checkOwnBinds(eps)
		for _, e := range eps {
			if e.wildcard || e.agent {
				continue
			}
			o, dup := first[e.hostPort()]
			if !dup {
				first[e.hostPort()] = owner{member: memberLabel(m, i), m: m, e: e}
				continue
			}
			if isLoopback(e.ip) && !SameHost(o.m, m) {
				continue // e.g. 127.0.0.1:2379 on every kubeadm host
			}
			if e.advertised != "" && e.advertised == o.e.advertised {
				continue // the same advertised URL twice is reported as such
			}
			d.errorf(e.line, "%s: listens on %s, which member %s also binds (%s, line %d): give each member its own IP or port",
				e.path, e.hostPort(), o.member, o.e.path, o.e.line)
		}
	}
}

func (d *doc) checkOwnBinds(eps []endpoint) {
	for i, e := range eps {
		for _, o := range eps[:i] {
			if e.clashes(o) {
				d.errorf(e.line, "%s: binds %s, which %s (line %d) also binds: give each its own port",
					e.path, e.hostPort(), o.path, o.line)
				break
			}
		}
	}
}

func (d *doc) endpoints(p string, m Member) []endpoint {
	eps := d.listenEndpoints(p, "listenPeerURLs", "peerURLs", m.ListenPeerURLs, m.PeerURLs)
	eps = append(eps, d.listenEndpoints(p, "listenClientURLs", "clientURLs", m.ListenClientURLs, m.ClientURLs)...)
	if e, ok := addrEndpoint(m.AgentAddr); ok {
		e.agent = true
		e.path, e.line = "agent.addr", d.line("agent.addr", p)
		if d.given[p+".agentAddr"] {
			e.path, e.line = p+".agentAddr", d.line(p+".agentAddr")
		}
		eps = append(eps, e)
	}
	return eps
}

// listenEndpoints uses the written listen URLs, or else the ones derived
// from the advertised URLs, labelled with the advertised URL's path.
func (d *doc) listenEndpoints(p, listenKey, advKey string, listen, advertised []string) []endpoint {
	var eps []endpoint
	if _, written := d.lines[index(p+"."+listenKey, 0)]; written {
		for i, raw := range listen {
			if e, ok := urlEndpoint(raw); ok {
				e.path = index(p+"."+listenKey, i)
				e.line = d.line(e.path)
				eps = append(eps, e)
			}
		}
		return eps
	}
	for _, l := range deriveListen(advertised) {
		if e, ok := urlEndpoint(l.url); ok {
			e.path = index(p+"."+advKey, l.origin)
			e.line = d.line(e.path, p)
			e.advertised = advKey + " " + urlKeys(advertised[l.origin : l.origin+1])[0]
			eps = append(eps, e)
		}
	}
	return eps
}

func urlEndpoint(raw string) (endpoint, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, false
	}
	return ipEndpoint(u.Hostname(), u.Port())
}

// addrEndpoint: an empty host binds every IP; a name other than localhost
// cannot be compared and is skipped.
func addrEndpoint(addr string) (endpoint, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, false
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if ip := listenHost(host); ip != "0.0.0.0" || host == "0.0.0.0" {
		return ipEndpoint(ip, port)
	}
	return endpoint{}, false
}

func ipEndpoint(host, port string) (endpoint, bool) {
	ip := net.ParseIP(host)
	if ip == nil || port == "" {
		return endpoint{}, false
	}
	return endpoint{ip: ip.String(), port: port, wildcard: ip.IsUnspecified()}, true
}
