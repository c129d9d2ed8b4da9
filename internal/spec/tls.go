package spec

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

// resolveTLS makes every path absolute against the spec file's directory;
// {name} stays for expandTLS.
func resolveTLS(base string, t *TLS) {
	for _, f := range t.files() {
		*f.p = resolvePath(base, *f.p)
	}
}

// expandTLS is t for member name: {name} replaced in every path.
func expandTLS(t TLS, name string) TLS {
	for _, f := range t.files() {
		*f.p = expand(*f.p, name)
	}
	return t
}
