package certs

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
)

// Errors a renewal stops at. Each comes back wrapped with the file and
// what to do.
var (
	// ErrKeyExposed: a private key file others may read or write (for the
	// CA's key, its group too): it is not used.
	ErrKeyExposed = errors.New("private key not kept secret")
	// ErrNotIssued: the certificate was not issued by the CA at hand, which
	// therefore cannot renew it.
	ErrNotIssued = errors.New("not issued by this CA")
)

// Issuer is a CA that renews certificates: its certificate and its
// private key. The key stays in memory, read once per renewal round; it is
// never written anywhere nor shown.
type Issuer struct {
	Cert *x509.Certificate
	key  crypto.Signer
}

// LoadIssuer reads the CA at certFile (one certificate, or a bundle during
// a CA rotation: the one that goes with the key) and its key at keyFile,
// which must be readable by its owner only, and owned by root or the
// agent's user.
func LoadIssuer(certFile, keyFile string) (*Issuer, error) {
	keyPEM, err := ReadSecret(keyFile)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	cs, err := Read(certFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	for _, c := range cs {
		if c.IsCA && samePublicKey(c.PublicKey, key.Public()) {
			return &Issuer{Cert: c, key: key}, nil
		}
	}
	return nil, fmt.Errorf("%s: no CA certificate in it goes with the key %s: name the CA's certificate and its own key", certFile, keyFile)
}

// ReadSecret reads a private key file: a regular file that neither group
// nor others may read or write. Its owner may be anyone (the agent's user,
// or root for kubeadm's keys; root runs `certs renew` on the agent's); a
// key that is not the certificate's is refused where it is used (the CA's
// must go with the CA certificate, a leaf's with its certificate). Its
// content is never part of an error.
func ReadSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: %w: group or others may read or write it (mode %v): chmod 600 %s", path, ErrKeyExposed, fi.Mode().Perm(), path)
	}
	return safefile.Read(path, maxBytes)
}

// readLeafKey reads a certificate's key: like ReadSecret, but its group
// may read it (root:etcd 0640 is how etcd's keys are often kept); never
// others, never a group that may write it.
func readLeafKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o027 != 0 {
		return nil, fmt.Errorf("%s: %w: others may read it, or its group write it (mode %v): chmod 600 (or 640) %s", path, ErrKeyExposed, fi.Mode().Perm(), path)
	}
	return safefile.Read(path, maxBytes)
}

func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM private key in it")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("private key does not parse: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("private key of type %T cannot sign", k)
		}
		return s, nil
	}
}

func samePublicKey(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// RenewAt is when c is due for renewal: before ahead of its expiry, or,
// with before 0, a third of its lifetime or 30 days ahead, whichever comes
// first. Never earlier than half its lifetime: a certificate of a few
// minutes (or days) is not renewed as soon as it is issued.
func RenewAt(c *x509.Certificate, before time.Duration) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	if before <= 0 {
		before = max(life/3, min(WarnBefore, life/2))
	}
	before = min(before, life/2)
	return c.NotAfter.Add(-before)
}

// Leaf is one certificate an agent keeps valid: its files, and the hosts
// it must name (those of the URLs it is reached at).
type Leaf struct {
	// Role is what it is for: client, peer, agent, or the name of one of
	// tls.renew.others.
	Role, CertFile, KeyFile string
	Hosts                   []string
}

// Renewal is what a renewal did: the leaf's role, its old certificate and
// the new one.
type Renewal struct {
	Role     string
	Old, New *x509.Certificate
}

// Renew issues l's certificate again with iss, now: same subject, names
// (plus any of l.Hosts it lacks), key usages and lifetime, and the same
// key, so that the one file that changes is the certificate, replaced in
// one rename (mode and owner kept). etcd reads its certificate and key
// again at every handshake: a new key would need two files replaced at
// once, and a handshake between the two renames would fail.
func Renew(l Leaf, iss *Issuer, now time.Time) (Renewal, error) {
	return issue(l, iss, now, true)
}

// Reissue is Renew by another CA than the one that issued l's
// certificate: a CA rotation's second phase, once every member trusts
// both. The intermediates the old file held are dropped (they were the
// old CA's).
func Reissue(l Leaf, iss *Issuer, now time.Time) (Renewal, error) {
	return issue(l, iss, now, false)
}

func issue(l Leaf, iss *Issuer, now time.Time, renew bool) (Renewal, error) {
	certPEM, err := safefile.Read(l.CertFile, maxBytes)
	if err != nil {
		return Renewal{}, err
	}
	chain, err := Parse(certPEM)
	if err != nil {
		return Renewal{}, fmt.Errorf("%s: %w", l.CertFile, err)
	}
	old := chain[0]
	if err := old.CheckSignatureFrom(iss.Cert); renew && err != nil {
		return Renewal{}, fmt.Errorf("%s: %w %q (issuer %q): renew it where it was issued, or name its CA in tls.ca",
			l.CertFile, ErrNotIssued, iss.Cert.Subject.CommonName, old.Issuer.CommonName)
	}
	if !renew {
		chain = chain[:1]
	}
	keyPEM, err := readLeafKey(l.KeyFile)
	if err != nil {
		return Renewal{}, err
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Renewal{}, fmt.Errorf("%s and %s are not a pair (%w): renewing would keep a broken pair", l.CertFile, l.KeyFile, err)
	}
	tmpl, err := renewed(old, l.Hosts, iss.Cert, now)
	if err != nil {
		return Renewal{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, iss.Cert, old.PublicKey, iss.key)
	if err != nil {
		return Renewal{}, fmt.Errorf("issue %s: %w", l.CertFile, err)
	}
	next, err := x509.ParseCertificate(der)
	if err != nil {
		return Renewal{}, fmt.Errorf("issue %s: %w", l.CertFile, err)
	}
	var out bytes.Buffer
	_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range chain[1:] {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	if _, err := tls.X509KeyPair(out.Bytes(), keyPEM); err != nil {
		return Renewal{}, fmt.Errorf("issue %s: the new certificate does not go with %s: %w", l.CertFile, l.KeyFile, err)
	}
	if err := replaceKeeping(l.CertFile, out.Bytes()); err != nil {
		return Renewal{}, err
	}
	return Renewal{Role: l.Role, Old: old, New: next}, nil
}

// renewed is the template of old's successor: everything old says of
// whom it names and what it may do, with a fresh serial and validity of
// the same length from now (a little back-dated for clocks behind).
func renewed(old *x509.Certificate, hosts []string, ca *x509.Certificate, now time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	// The lifetime is the old one's, not cut at the CA's expiry: a cut
	// would be kept by every later renewal, shrinking the lifetime each
	// time. A certificate outliving its CA is refused with the CA anyway;
	// the CA's own expiry is what its alert and certs status warn of.
	life := old.NotAfter.Sub(old.NotBefore)
	notBefore := now.Add(-min(5*time.Minute, life/10)).Truncate(time.Second)
	notAfter := notBefore.Add(life)
	if !ca.NotAfter.After(now) {
		return nil, fmt.Errorf("the CA %q expired on %s: it can issue nothing valid: rotate the CA", ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.RFC3339))
	}
	t := &x509.Certificate{
		SerialNumber:          serial,
		RawSubject:            old.RawSubject,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              old.KeyUsage,
		ExtKeyUsage:           old.ExtKeyUsage,
		UnknownExtKeyUsage:    old.UnknownExtKeyUsage,
		BasicConstraintsValid: old.BasicConstraintsValid,
		DNSNames:              old.DNSNames,
		IPAddresses:           old.IPAddresses,
		URIs:                  old.URIs,
		EmailAddresses:        old.EmailAddresses,
	}
	for _, h := range hosts {
		if old.VerifyHostname(h) == nil {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	return t, nil
}

// replaceKeeping replaces path with data in one rename, keeping its mode
// and, when this process may, its owner.
func replaceKeeping(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	uid, gid := -1, -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	return atomicfile.Write(path, fi.Mode().Perm(), func(w io.Writer) error {
		if f, ok := w.(interface{ Chown(int, int) error }); ok && uid >= 0 {
			if err := f.Chown(uid, gid); err != nil {
				return fmt.Errorf("keep the owner %d:%d: %w", uid, gid, err)
			}
		}
		_, err := w.Write(data)
		return err
	})
}
