package spec

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
)

// usageCheck is one certificate's role and the extended key usages the
// role needs: Go's TLS (etcd's and the agent's) refuses a certificate
// whose extended key usages do not allow what it is used for, with
// "certificate specifies an incompatible key usage".
type usageCheck struct {
	key   string
	needs []x509.ExtKeyUsage
	why   string
}

// usageChecks are the roles of member m's certificates. A member's peer
// certificate is its server certificate for the other members, and its
// client certificate when it connects to them, which they check when
// tls.peer has a trusted CA (etcd then demands client certificates).
func usageChecks(t TLS) []usageCheck {
	peer := usageCheck{"tls.peer.certFile", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		"the other members check it as a server certificate"}
	if t.Peer.TrustedCAFile != "" || t.Peer.ClientCertAuth {
		peer.needs = append(peer.needs, x509.ExtKeyUsageClientAuth)
		peer.why = "a member presents its peer certificate both as a server and, when it connects to the other members, as a client; they check both"
	}
	return []usageCheck{
		{"tls.client.certFile", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, "the agent and etcd's clients check it as a server certificate"},
		peer,
		{"tls.agent.certFile", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, "the agent presents it to etcd as its client certificate"},
	}
}

// checkUsages checks the extended key usages of member m's certificates
// (data by key) against their roles.
func (d *doc) checkUsages(reported map[string]bool, t TLS, data map[string][]byte, labels map[string]string) {
	for _, c := range usageChecks(t) {
		chain, err := certs.Parse(data[c.key])
		if err != nil {
			continue // not a pair: reported by checkKeyPair
		}
		leaf := chain[0]
		var lacks []string
		for _, u := range c.needs {
			if !allows(leaf, u) {
				lacks = append(lacks, usageName(u))
			}
		}
		if len(lacks) == 0 {
			continue
		}
		needs := make([]string, len(c.needs))
		for i, u := range c.needs {
			needs[i] = usageName(u)
		}
		d.errorOnce(reported, c.key, "%s: %s: its extended key usage is %s, without %s: %s, and TLS refuses it (\"certificate specifies an incompatible key usage\"): issue it with %s",
			c.key, labels[c.key], usagesOf(leaf), strings.Join(lacks, " and "), c.why, strings.Join(needs, " and "))
	}
}

// allows reports whether Go's x509 verification accepts leaf for usage
// u: a certificate without the extension allows every usage.
func allows(leaf *x509.Certificate, u x509.ExtKeyUsage) bool {
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return true
	}
	return slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) || slices.Contains(leaf.ExtKeyUsage, u)
}

func usagesOf(leaf *x509.Certificate) string {
	var out []string
	for _, u := range leaf.ExtKeyUsage {
		out = append(out, usageName(u))
	}
	for _, oid := range leaf.UnknownExtKeyUsage {
		out = append(out, oid.String())
	}
	return strings.Join(out, ", ") + " only"
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageCodeSigning:
		return "codeSigning"
	case x509.ExtKeyUsageEmailProtection:
		return "emailProtection"
	case x509.ExtKeyUsageAny:
		return "any"
	}
	return fmt.Sprintf("usage %d", u)
}
