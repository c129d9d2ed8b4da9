// Package certs reads the certificates a spec names: their expiry for
// validate, status and the agent's metrics, and a fingerprint of the CA
// files, which etcd reads only when it starts.
package certs

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
)

// WarnBefore is how long before its expiry a certificate is reported:
// validate warns, and the packaged alert fires.
const WarnBefore = 30 * 24 * time.Hour

// maxBytes bounds a certificate file: a CA bundle is a few hundred kB.
const maxBytes = 4 << 20

// File is one certificate file. Kind says what it is for: client (etcd's
// certificate on its client port), peer, agent (the agent's client
// certificate) or ca (a trusted CA file).
type File struct {
	Kind, Path string
}

// Expiry is when the certificate in a file expires: for a file with
// several (a CA bundle, a chain), the first to expire. Err is why it could
// not be read.
type Expiry struct {
	File
	NotAfter time.Time
	Err      error
}

// Parse reads every PEM certificate in data.
func Parse(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return out, nil
}

// Read reads the certificates in path, a regular file.
func Read(path string) ([]*x509.Certificate, error) {
	data, err := safefile.Read(path, maxBytes)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Expiries reads each file's expiry.
func Expiries(files []File) []Expiry {
	out := make([]Expiry, 0, len(files))
	for _, f := range files {
		e := Expiry{File: f}
		cs, err := Read(f.Path)
		if err != nil {
			e.Err = fmt.Errorf("%s: %w", f.Path, err)
		} else {
			e.NotAfter = slices.MinFunc(cs, func(a, b *x509.Certificate) int { return a.NotAfter.Compare(b.NotAfter) }).NotAfter
		}
		out = append(out, e)
	}
	return out
}

// Nearest is the expiry that comes first among those read; ok is false
// when none could be read.
func Nearest(es []Expiry) (Expiry, bool) {
	var best Expiry
	ok := false
	for _, e := range es {
		if e.Err == nil && (!ok || e.NotAfter.Before(best.NotAfter)) {
			best, ok = e, true
		}
	}
	return best, ok
}

// Days is how long until t in whole days, for messages ("in 9 days").
func Days(t, now time.Time) int {
	return int(t.Sub(now) / (24 * time.Hour))
}

// Fingerprint identifies the contents of files: it changes when any of
// them does. A file that cannot be read counts as its error, so that it
// changes again once the file is back.
func Fingerprint(paths []string) string {
	h := sha256.New()
	for _, p := range paths {
		data, err := safefile.Read(p, maxBytes)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(h, "%s %x\n", p, sum)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Names lists what certificate c is valid for, for messages:
// "DNS a, IP 127.0.0.1".
func Names(c *x509.Certificate) string {
	var out []string
	for _, n := range c.DNSNames {
		out = append(out, "DNS "+n)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP "+ip.String())
	}
	if len(out) == 0 {
		return "no name or address"
	}
	return strings.Join(out, ", ")
}

// CAID identifies a CA by its key: the first 16 hex digits of the SHA-256
// of its public key (a CA re-issued with the same key is the same CA).
func CAID(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:8])
}

// CAIDOf is CAID of the first certificate in path ("?" if unreadable).
func CAIDOf(path string) string {
	cs, err := Read(path)
	if err != nil {
		return "?"
	}
	return CAID(cs[0])
}
