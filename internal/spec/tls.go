package spec

import "slices"

// Enabled reports whether etcd serves this side over TLS: the server
// certificate is what turns it on (keyFile must come with it).
func (t TLSServer) Enabled() bool { return t.CertFile != "" }

// tlsFile is one file field of tls:, named by its path in the spec.
type tlsFile struct {
	key string
	p   *string
}

// files lists every file field of t, in spec order, so that resolving,
// expanding and checking them cannot miss one.
func (t *TLS) files() []tlsFile {
	return []tlsFile{
		{"tls.client.certFile", &t.Client.CertFile},
		{"tls.client.keyFile", &t.Client.KeyFile},
		{"tls.client.trustedCAFile", &t.Client.TrustedCAFile},
		{"tls.peer.certFile", &t.Peer.CertFile},
		{"tls.peer.keyFile", &t.Peer.KeyFile},
		{"tls.peer.trustedCAFile", &t.Peer.TrustedCAFile},
		{"tls.agent.certFile", &t.Agent.CertFile},
		{"tls.agent.keyFile", &t.Agent.KeyFile},
		{"tls.agent.trustedCAFile", &t.Agent.TrustedCAFile},
	}
}

// renewFiles lists the file fields of tls.ca and tls.renew.others: paths
// like those of files, but of certificates etcd does not use, and a CA key
// validate never reads (it need not be on every host).
func (t *TLS) renewFiles() []tlsFile {
	out := []tlsFile{{"tls.ca.certFile", &t.CA.CertFile}, {"tls.ca.keyFile", &t.CA.KeyFile},
		{"tls.ca.next.certFile", &t.CA.Next.CertFile}, {"tls.ca.next.keyFile", &t.CA.Next.KeyFile}}
	for i := range t.Renew.Others {
		o := &t.Renew.Others[i]
		p := index("tls.renew.others", i)
		out = append(out, tlsFile{p + ".certFile", &o.CertFile}, tlsFile{p + ".keyFile", &o.KeyFile})
	}
	return out
}

// allFiles is every path tls: holds.
func (t *TLS) allFiles() []tlsFile { return append(t.files(), t.renewFiles()...) }

// resolveTLS makes every path absolute against the spec file's directory;
// {name} stays for expandTLS.
func resolveTLS(base string, t *TLS) {
	for _, f := range t.allFiles() {
		*f.p = resolvePath(base, *f.p)
	}
}

// expandTLS is t for member name: {name} replaced in every path (on a copy
// of Renew.Others: t shares it with the template).
func expandTLS(t TLS, name string) TLS {
	t.Renew.Others = slices.Clone(t.Renew.Others)
	for _, f := range t.allFiles() {
		*f.p = expand(*f.p, name)
	}
	return t
}
