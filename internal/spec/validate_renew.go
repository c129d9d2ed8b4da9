package spec

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"regexp"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
)

var otherName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// checkRenew checks tls.ca and tls.renew: the CA must be one, its key (on
// a host that has it) secret and the CA's; each of tls.renew.others is
// named and a pair. A CA key missing on this host is only a warning: its
// agent renews nothing, which status and certs status say too.
func (d *doc) checkRenew(s *Spec) {
	ca := s.TLS.CA
	// A certFile without its keyFile is a CA named for status only (its
	// key kept off the hosts); a key without its certificate is a mistake.
	for _, side := range []struct{ key, cert, keyFile string }{{"tls.ca", ca.CertFile, ca.KeyFile}, {"tls.ca.next", ca.Next.CertFile, ca.Next.KeyFile}} {
		if side.cert == "" && side.keyFile != "" {
			d.errorf(d.line(side.key+".keyFile"), "%s.certFile: missing: keyFile needs the CA certificate that goes with it", side.key)
		}
	}
	if ca.Next.CertFile != "" && ca.CertFile == "" {
		d.errorf(d.line("tls.ca.next.certFile", "tls.ca.next"), "tls.ca.next: needs tls.ca.certFile: a rotation goes from the CA in force (tls.ca) to this one")
	}
	if b := s.TLS.Renew.Before; b.Duration < 0 {
		d.errorf(d.line("tls.renew.before"), "tls.renew.before: %s: must not be negative (0, or leave it out, for the default: a third of a certificate's lifetime or 30 days before it expires)", b)
	}
	d.checkOthers(s.TLS.Renew.Others)
	// The CA files, per member ({name} paths are each host's copy), each
	// path once.
	seen := map[string]bool{}
	for _, m := range s.Members {
		if k := m.TLS.CA.CertFile + "|" + m.TLS.CA.KeyFile + "|" + m.TLS.CA.Next.CertFile; !seen[k] {
			seen[k] = true
			d.checkNextCA(m.TLS.CA)
			d.checkCAFiles(s, m.TLS.CA)
		}
	}
}

// checkCAFiles checks the files of tls.ca (as one member's host has them).
func (d *doc) checkCAFiles(s *Spec, ca TLSCA) {
	if ca.CertFile == "" || ca.KeyFile == "" {
		return
	}
	cas, err := certs.Read(ca.CertFile)
	if err != nil {
		d.errorf(d.line("tls.ca.certFile"), "tls.ca.certFile: %s: cannot read it: %s", quote(ca.CertFile), reason(err))
		return
	}
	if !cas[0].IsCA {
		d.errorf(d.line("tls.ca.certFile"), "tls.ca.certFile: %s: %q is not a CA certificate: name the CA that issues the members' certificates", quote(ca.CertFile), cas[0].Subject.CommonName)
		return
	}
	iss, err := certs.LoadIssuer(ca.CertFile, ca.KeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.warns = append(d.warns, Error{File: d.file, Line: d.line("tls.ca.keyFile"), Msg: "tls.ca.keyFile: " + quote(ca.KeyFile) +
			": not on this host: its agent renews no certificate (etcdkeeper certs status says when each expires; renew by hand with etcdkeeper certs renew --ca-key FILE)"})
		return
	case err != nil && ca.Next.CertFile != "" && !errors.Is(err, certs.ErrKeyExposed):
		// A rotation that dropped the old CA from a file tls.ca shares
		// with the trusted CA files (kubeadm's ca.crt): expected until
		// tls.ca is made the new CA.
		d.warns = append(d.warns, Error{File: d.file, Line: d.line("tls.ca.keyFile"), Msg: "tls.ca.keyFile: " + err.Error() +
			" (during a CA rotation, once the old CA is dropped: make tls.ca the new CA and remove tls.ca.next)"})
		return
	case err != nil:
		d.errorf(d.line("tls.ca.keyFile"), "tls.ca.keyFile: %v", err)
		return
	}
	d.checkIssued(s, iss)
}

// checkNextCA: the CA a rotation goes to must be a CA, another one than
// tls.ca's, and its key (on a host that has it) its own and secret.
func (d *doc) checkNextCA(ca TLSCA) {
	next := ca.Next
	if next.CertFile == "" || ca.CertFile == "" {
		return
	}
	line := d.line("tls.ca.next.certFile", "tls.ca.next")
	cs, err := certs.Read(next.CertFile)
	if err != nil {
		d.errorf(line, "tls.ca.next.certFile: %s: cannot read it: %s", quote(next.CertFile), reason(err))
		return
	}
	if !cs[0].IsCA {
		d.errorf(line, "tls.ca.next.certFile: %s: %q is not a CA certificate", quote(next.CertFile), cs[0].Subject.CommonName)
		return
	}
	id := certs.CAID(cs[0])
	if cur, err := certs.LoadIssuer(ca.CertFile, ca.KeyFile); err == nil && certs.CAID(cur.Cert) == id {
		d.errorf(line, "tls.ca.next.certFile: %s: the same CA key as tls.ca: a rotation needs a new CA (etcdkeeper certs rotate-ca --new-ca DIR makes one)", quote(next.CertFile))
		return
	}
	if ids, err := certs.TrustIDs(ca.CertFile); err == nil && len(ids) == 1 && ids[0] == id {
		// kubeadm's ca.crt is tls.ca and the trusted CA file: the
		// rotation's last phase left only the new CA in it.
		d.warns = append(d.warns, Error{File: d.file, Line: line, Msg: "tls.ca.next: tls.ca.certFile " + quote(ca.CertFile) +
			" holds only this CA: once `etcdkeeper certs rotate-ca` says done, make tls.ca this CA (its key in place of the old one) and remove tls.ca.next"})
	}
	if next.KeyFile == "" {
		return
	}
	_, err = certs.LoadIssuer(next.CertFile, next.KeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.warns = append(d.warns, Error{File: d.file, Line: d.line("tls.ca.next.keyFile"), Msg: "tls.ca.next.keyFile: " + quote(next.KeyFile) +
			": not on this host: its agent cannot have its certificates issued by the new CA, and the rotation waits for it"})
	case err != nil:
		d.errorf(d.line("tls.ca.next.keyFile"), "tls.ca.next.keyFile: %v", err)
	}
}

// checkIssued warns of each certificate on this host the CA did not issue:
// no agent renews it.
func (d *doc) checkIssued(s *Spec, iss *certs.Issuer) {
	reported := map[string]bool{}
	for _, m := range s.Members {
		for _, l := range m.Leaves() {
			chain, err := certs.Read(l.CertFile)
			if err != nil || chain[0].CheckSignatureFrom(iss.Cert) == nil || issuedByNext(m, chain[0]) {
				continue // not on this host, or renewable
			}
			d.warnOnce(reported, "tls.ca.certFile", "tls.ca.certFile: the %s certificate %s was issued by %q, not by this CA (%q): no agent renews it; issue it from tls.ca, or renew it where it was issued",
				l.Role, quote(l.CertFile), chain[0].Issuer.CommonName, iss.Cert.Subject.CommonName)
		}
	}
}

// issuedByNext: c was issued by tls.ca.next (a rotation under way).
func issuedByNext(m Member, c *x509.Certificate) bool {
	if m.TLS.CA.Next.CertFile == "" {
		return false
	}
	next, err := certs.Read(m.TLS.CA.Next.CertFile)
	return err == nil && c.CheckSignatureFrom(next[0]) == nil
}

func (d *doc) checkOthers(others []TLSOther) {
	seen := map[string]bool{"client": true, "peer": true, "agent": true, "ca": true}
	for i, o := range others {
		p := index("tls.renew.others", i)
		switch {
		case o.Name == "":
			d.errorf(d.line(p+".name", p), "%s.name: missing: name the certificate (e.g. apiserver-etcd-client): status and the metrics show it by that name", p)
		case !otherName.MatchString(o.Name):
			d.errorf(d.line(p+".name", p), "%s.name: %s: use lower-case letters, digits and dashes", p, quote(o.Name))
		case seen[o.Name]:
			d.errorf(d.line(p+".name", p), "%s.name: %s: taken (by another entry, or one of client, peer, agent, ca): give each a name of its own", p, quote(o.Name))
		}
		seen[o.Name] = true
		if o.CertFile == "" && o.KeyFile == "" {
			d.errorf(d.line(p), "%s: needs certFile and keyFile: the certificate to renew and its key", p)
		}
		d.checkPair(p, o.CertFile, o.KeyFile)
	}
}
