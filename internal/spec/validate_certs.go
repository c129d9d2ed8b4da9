package spec

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
)

// CertFiles lists the certificate files of t (no keys), each once, with
// what each is for: what the agent's expiry metrics and status report.
func (t TLS) CertFiles() []certs.File {
	var out []certs.File
	seen := map[string]bool{}
	for _, f := range []certs.File{
		{Kind: "client", Path: t.Client.CertFile},
		{Kind: "peer", Path: t.Peer.CertFile},
		{Kind: "agent", Path: t.Agent.CertFile},
		{Kind: "ca", Path: t.Client.TrustedCAFile},
		{Kind: "ca", Path: t.Peer.TrustedCAFile},
		{Kind: "ca", Path: t.Agent.TrustedCAFile},
		{Kind: "ca", Path: t.CA.CertFile},
	} {
		if f.Path != "" && !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	for _, o := range t.Renew.Others {
		if o.CertFile != "" && !seen[o.CertFile] {
			seen[o.CertFile] = true
			out = append(out, certs.File{Kind: o.Name, Path: o.CertFile})
		}
	}
	return out
}

// CAFiles lists the trusted CA files of t, each once: the files etcd and
// the agent read only when they start (tls.ca, which only the renewal
// reads, is not one of them).
func (t TLS) CAFiles() []string {
	var out []string
	for _, p := range []string{t.Client.TrustedCAFile, t.Peer.TrustedCAFile, t.Agent.TrustedCAFile} {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// certCheck is one certificate file to check for a member: its validity,
// its chain to the CA that those who check it trust, and, for a server
// certificate, the member's URLs it must cover.
type certCheck struct {
	key    string // tls.peer.certFile
	caKey  string // the CA file that verifies it
	whoUse string // who verifies it against that CA
	urls   []string
}

// checkCerts checks the certificates of member m that were read (data by
// key): expired or not yet valid is an error, expiring within
// certs.WarnBefore a warning; a certificate must chain to the CA its
// verifier trusts and cover the URLs it is reached at.
func (d *doc) checkCerts(reported map[string]bool, m Member, shared map[string]bool, data map[string][]byte, labels map[string]string) {
	now := time.Now()
	for _, key := range []string{"tls.client.trustedCAFile", "tls.peer.trustedCAFile", "tls.agent.trustedCAFile"} {
		if cs, err := certs.Parse(data[key]); err == nil {
			for _, c := range cs {
				d.checkValidity(reported, key, labels[key]+" (CA "+c.Subject.CommonName+")", c, now)
			}
		}
	}
	for _, c := range []certCheck{
		{"tls.client.certFile", "tls.agent.trustedCAFile", "the agent", m.ClientURLs},
		{"tls.peer.certFile", "tls.peer.trustedCAFile", "the other members", m.PeerURLs},
		{"tls.agent.certFile", "tls.client.trustedCAFile", "etcd", nil},
	} {
		chain, err := certs.Parse(data[c.key])
		if err != nil {
			continue // not a pair: reported by checkKeyPair
		}
		leaf := chain[0]
		d.checkValidity(reported, c.key, labels[c.key], leaf, now)
		d.checkChain(reported, c, chain, data[c.caKey], labels)
		if len(c.urls) > 0 {
			d.checkSANs(reported, c.key, labels[c.key], leaf, c.urls, shared[c.key])
		}
	}
}

func (d *doc) checkValidity(reported map[string]bool, key, label string, c *x509.Certificate, now time.Time) {
	const day = "2006-01-02"
	switch {
	case now.After(c.NotAfter):
		d.expiredOnce(reported, key, "%s: %s: expired on %s (%d days ago): etcd and the agent refuse it; issue a new one from the CA and put it in place",
			key, label, c.NotAfter.UTC().Format(day), -certs.Days(c.NotAfter, now))
	case now.Before(c.NotBefore):
		d.expiredOnce(reported, key, "%s: %s: not valid before %s: check this host's clock, or issue one that is valid now",
			key, label, c.NotBefore.UTC().Format(time.RFC3339))
	case c.NotAfter.Sub(now) < certs.WarnBefore:
		d.warnOnce(reported, key, "%s: %s: expires on %s, in %d days: issue a new one from the CA before then and put it in place "+
			"(kubeadm does not renew etcd's certificates once etcd is external)", key, label, c.NotAfter.UTC().Format(day), certs.Days(c.NotAfter, now))
	}
}

// checkChain: the certificate must be signed (through the intermediates in
// its own file) by the CA its verifier trusts.
func (d *doc) checkChain(reported map[string]bool, c certCheck, chain []*x509.Certificate, caPEM []byte, labels map[string]string) {
	cas, err := certs.Parse(caPEM)
	if err != nil {
		return // no CA given, or none read: reported elsewhere
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	leaf := chain[0]
	// Validity is checked on its own; here only the signatures count.
	at := leaf.NotBefore.Add(time.Second)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	var invalid x509.CertificateInvalidError
	if err == nil || errors.As(err, &invalid) && invalid.Reason == x509.Expired {
		return
	}
	d.errorOnce(reported, c.key, "%s: %s: not signed by %s %s, the CA %s trusts (%v): issue it from that CA, or name the CA that signed it",
		c.key, labels[c.key], c.caKey, labels[c.caKey], c.whoUse, err)
}

// checkSANs: a client that connects to a URL checks that the certificate
// names its host. A path without {name} is one file per host, each
// host's own: there the certificate must cover one member's URLs, the
// member of the host it is on.
func (d *doc) checkSANs(reported map[string]bool, key, label string, leaf *x509.Certificate, urls []string, sharedPath bool) {
	if sharedPath {
		return // checked once for all members, by checkSharedSANs
	}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && leaf.VerifyHostname(u.Hostname()) != nil {
			d.errorOnce(reported, key, "%s: %s: does not cover %s (it covers %s): TLS clients that connect there refuse it; issue one that names %s",
				key, label, raw, certs.Names(leaf), u.Hostname())
		}
	}
}

// covers reports whether the certificate names the host of every URL.
func covers(leaf *x509.Certificate, urls []string) bool {
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || leaf.VerifyHostname(u.Hostname()) != nil {
			return false
		}
	}
	return true
}

// checkSharedSANs: a certificate path shared by every member is, on each
// host, that host's own file; on this host it must be some member's.
func (d *doc) checkSharedSANs(s *Spec, reported map[string]bool) {
	for _, side := range []struct {
		key  string
		path string
		urls func(Member) []string
	}{
		{"tls.client.certFile", s.TLS.Client.CertFile, func(m Member) []string { return m.ClientURLs }},
		{"tls.peer.certFile", s.TLS.Peer.CertFile, func(m Member) []string { return m.PeerURLs }},
	} {
		if side.path == "" || strings.Contains(side.path, "{name}") {
			continue
		}
		chain, err := certs.Read(side.path)
		if err != nil {
			continue // reported by checkTLSFilesOf
		}
		var all []string
		for _, m := range s.Members {
			if covers(chain[0], side.urls(m)) {
				return
			}
			all = append(all, side.urls(m)...)
		}
		d.errorOnce(reported, side.key, "%s: %q: covers no member's URLs (it covers %s; the members' are %s): on each host it must be the certificate of that host's member",
			side.key, side.path, certs.Names(chain[0]), strings.Join(all, ", "))
	}
}

// warnOnce is errorOnce for a warning.
func (d *doc) warnOnce(reported map[string]bool, key, format string, args ...any) {
	d.warning(reported, false, key, format, args...)
}

// expiredOnce is warnOnce for a certificate not valid now (Error.Expired).
func (d *doc) expiredOnce(reported map[string]bool, key, format string, args ...any) {
	d.warning(reported, true, key, format, args...)
}

func (d *doc) warning(reported map[string]bool, expired bool, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if reported[msg] {
		return
	}
	reported[msg] = true
	d.warns = append(d.warns, Error{File: d.file, Line: d.line(key), Msg: msg, Expired: expired})
}

// Expired is the warnings about certificates not valid now, which
// validate and import refuse.
func (e Errors) Expired() Errors {
	var out Errors
	for _, w := range e {
		if w.Expired {
			out = append(out, w)
		}
	}
	return out
}
