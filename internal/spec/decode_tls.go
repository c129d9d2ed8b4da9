package spec

import "gopkg.in/yaml.v3"

// tlsFields decodes tls:. etcd's two listening sides take the same keys.
func (d *doc) tlsFields(t *TLS) map[string]field {
	return map[string]field{
		"client": d.object(d.tlsServerFields(&t.Client)),
		"peer":   d.object(d.tlsServerFields(&t.Peer)),
		"agent": d.object(map[string]field{
			"certFile":      d.str(&t.Agent.CertFile),
			"keyFile":       d.str(&t.Agent.KeyFile),
			"trustedCAFile": d.str(&t.Agent.TrustedCAFile),
		}),
	}
}

func (d *doc) tlsServerFields(s *TLSServer) map[string]field {
	return map[string]field{
		"certFile":       d.str(&s.CertFile),
		"keyFile":        d.str(&s.KeyFile),
		"trustedCAFile":  d.str(&s.TrustedCAFile),
		"clientCertAuth": d.switchField(&s.ClientCertAuth),
	}
}

func (d *doc) authFields(a *Auth) map[string]field {
	return map[string]field{
		"credentialsFile": d.str(&a.CredentialsFile),
	}
}

// switchField reads a true/false that defaults to false, so it needs no
// pointer to tell "not given" apart.
func (d *doc) switchField(dst *bool) field {
	return func(path string, n *yaml.Node) {
		var v *bool
		d.boolean(&v)(path, n)
		if v != nil {
			*dst = *v
		}
	}
}
