package spec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// checkSecurityFields checks the tls: and auth: paths as written, before
// they are made absolute.
func (d *doc) checkSecurityFields(s *Spec) {
	for _, f := range s.TLS.allFiles() {
		d.checkPath(f.key, *f.p)
	}
	d.checkPath("auth.credentialsFile", s.Auth.CredentialsFile)
	if strings.Contains(s.Auth.CredentialsFile, "{name}") {
		d.errorf(d.line("auth.credentialsFile"), "auth.credentialsFile: %s: {name} is not expanded here: the credentials are the cluster's, one file for every agent",
			quote(s.Auth.CredentialsFile))
	}
}

// checkSecurity checks tls: and auth: after defaults, when every path is
// absolute and each member has its own expanded copy of tls:.
func (d *doc) checkSecurity(s *Spec) {
	d.checkServerTLS("tls.client", s.TLS.Client)
	d.checkServerTLS("tls.peer", s.TLS.Peer)
	d.checkPair("tls.agent", s.TLS.Agent.CertFile, s.TLS.Agent.KeyFile)
	d.checkAgentCert(s)
	d.checkSchemes(s)
	d.checkTLSFiles(s)
	d.checkRenew(s)
	d.checkCredentialsFile(s.Auth.CredentialsFile)
	d.checkBackupFiles(s.Backup.S3)
	d.checkIdentityFile(s.Backup.Encryption, d.checkRecipientsFile(s.Backup.Encryption))
}

// checkAgentCert: etcd demands a client certificate of every client when
// clientCertAuth is true, and also whenever tls.client has a trusted CA,
// whatever clientCertAuth says (client/pkg/v3 transport's ServerConfig:
// TrustedCAFile != "" || ClientCertAuth → RequireAndVerifyClientCert).
// An agent without one is refused: "client didn't provide a certificate".
func (d *doc) checkAgentCert(s *Spec) {
	c := s.TLS.Client
	if s.TLS.Agent.CertFile != "" || s.TLS.Agent.KeyFile != "" || !c.Enabled() {
		return
	}
	switch {
	case c.ClientCertAuth:
		d.errorf(d.line("tls.agent", "tls.client.clientCertAuth"), "tls.agent: missing: tls.client.clientCertAuth is true, so etcd answers only clients with a certificate: give the agent one with tls.agent.certFile and keyFile")
	case c.TrustedCAFile != "":
		d.errorf(d.line("tls.client.trustedCAFile"), "tls.agent: missing: tls.client.trustedCAFile is set, and then etcd demands a client certificate of every client even with clientCertAuth false, so it would refuse the agent (%q): give the agent one with tls.agent.certFile and keyFile (signed by that CA), or remove tls.client.trustedCAFile", "client didn't provide a certificate")
	}
}

func (d *doc) checkServerTLS(side string, t TLSServer) {
	d.checkPair(side, t.CertFile, t.KeyFile)
	switch {
	case t.ClientCertAuth && !t.Enabled():
		d.errorf(d.line(side+".clientCertAuth"), "%s.clientCertAuth: needs %s.certFile and keyFile: client certificates are checked only over TLS", side, side)
	case t.ClientCertAuth && t.TrustedCAFile == "":
		d.errorf(d.line(side+".clientCertAuth"), "%s.clientCertAuth: needs %s.trustedCAFile: the CA that signs the certificates clients present", side, side)
	case t.TrustedCAFile != "" && !t.Enabled():
		d.errorf(d.line(side+".trustedCAFile"), "%s.trustedCAFile: has no effect without %s.certFile and keyFile: set them or remove it", side, side)
	}
}

// checkPair: a certificate is useless without its key and the other way
// round.
func (d *doc) checkPair(side, cert, key string) {
	switch {
	case cert != "" && key == "":
		d.errorf(d.line(side+".certFile"), "%s.keyFile: missing: certFile needs the private key that goes with it", side)
	case cert == "" && key != "":
		d.errorf(d.line(side+".keyFile"), "%s.certFile: missing: keyFile needs the certificate that goes with it", side)
	}
}

// checkSchemes: etcd serves a side over https exactly when it has a
// certificate for it, so a URL with the other scheme is advertised but
// never answered.
func (d *doc) checkSchemes(s *Spec) {
	for i, m := range s.Members {
		p := memberPath(i)
		if d.broken[p] {
			continue
		}
		d.checkScheme(p, "clientURLs", m.ClientURLs, "tls.client", s.TLS.Client.Enabled())
		d.checkScheme(p, "peerURLs", m.PeerURLs, "tls.peer", s.TLS.Peer.Enabled())
		// Derived listen URLs take the advertised scheme: only the
		// written ones can differ.
		if d.given[p+".listenClientURLs"] {
			d.checkScheme(p, "listenClientURLs", m.ListenClientURLs, "tls.client", s.TLS.Client.Enabled())
		}
		if d.given[p+".listenPeerURLs"] {
			d.checkScheme(p, "listenPeerURLs", m.ListenPeerURLs, "tls.peer", s.TLS.Peer.Enabled())
		}
	}
}

func (d *doc) checkScheme(member, key string, urls []string, side string, secure bool) {
	path := member + "." + key
	for i, raw := range urls {
		u, err := parseURL(raw)
		if err != nil || (u.Scheme == "https") == secure {
			continue // a bad URL is reported by checkURLs
		}
		p := index(path, i)
		if secure {
			d.errorf(d.line(p, path), "%s: %s: must be https: %s.certFile (line %d) makes etcd serve TLS there", p, quote(raw), side, d.line(side+".certFile"))
		} else {
			d.errorf(d.line(p, path), "%s: %s: must be http: %s sets no certFile and keyFile, so etcd serves plain http there: set them or use http", p, quote(raw), side)
		}
	}
}

// checkTLSFiles reads every file tls: names, per member: a path with
// {name} is a different file for each. A path without it is the same
// file for all, and its problems are reported once.
func (d *doc) checkTLSFiles(s *Spec) {
	reported := map[string]bool{}
	for i, m := range s.Members {
		if d.broken[memberPath(i)] || m.Name == "" {
			continue
		}
		d.checkTLSFilesOf(s.TLS, m, reported)
	}
	d.checkSharedSANs(s, reported)
}

func (d *doc) checkTLSFilesOf(template TLS, m Member, reported map[string]bool) {
	t := m.TLS
	tf, mf := template.files(), t.files()
	data := map[string][]byte{}
	labels := map[string]string{}
	shared := map[string]bool{}
	for j, f := range mf {
		if *f.p == "" {
			continue
		}
		labels[f.key] = strconv.Quote(*f.p)
		shared[f.key] = *f.p == *tf[j].p
		if !shared[f.key] {
			labels[f.key] += " (member " + m.Name + ")"
		}
		b, err := os.ReadFile(*f.p)
		if err != nil {
			d.errorOnce(reported, f.key, "%s: %s: cannot read it: %s", f.key, labels[f.key], reason(err))
			continue
		}
		data[f.key] = b
	}
	for _, side := range []string{"tls.client", "tls.peer", "tls.agent"} {
		d.checkKeyPair(reported, side, data, labels)
		d.checkCA(reported, side+".trustedCAFile", data, labels)
	}
	d.checkCerts(reported, m, shared, data, labels)
	d.checkUsages(reported, t, data, labels)
}

// checkKeyPair: etcd fails at start, and only then, when the key is not
// the certificate's.
func (d *doc) checkKeyPair(reported map[string]bool, side string, data map[string][]byte, labels map[string]string) {
	cert, key := data[side+".certFile"], data[side+".keyFile"]
	if cert == nil || key == nil {
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		d.errorOnce(reported, side+".certFile", "%s.certFile: %s and keyFile %s are not a pair: %v",
			side, labels[side+".certFile"], labels[side+".keyFile"], err)
	}
}

func (d *doc) checkCA(reported map[string]bool, key string, data map[string][]byte, labels map[string]string) {
	ca := data[key]
	if ca == nil {
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		d.errorOnce(reported, key, "%s: %s: no PEM certificate in it: it must hold the CA certificate(s)", key, labels[key])
	}
}

// errorOnce reports a problem at the line of key unless the very same
// problem was reported already (a shared file, checked for every member).
func (d *doc) errorOnce(reported map[string]bool, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if reported[msg] {
		return
	}
	reported[msg] = true
	d.errorf(d.line(key), "%s", msg)
}

// checkCredentialsFile reads the credentials the way the agent will. No
// error quotes the file: it holds a password.
func (d *doc) checkCredentialsFile(path string) {
	if path == "" {
		return
	}
	line := d.line("auth.credentialsFile")
	b, err := os.ReadFile(path)
	if err != nil {
		d.errorf(line, "auth.credentialsFile: %q: cannot read it: %s", path, reason(err))
		return
	}
	if _, _, err := ParseCredentials(b); err != nil {
		d.errorf(line, "auth.credentialsFile: %q: %v", path, err)
	}
}

// reason is an os error without the path, which the message names already.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
