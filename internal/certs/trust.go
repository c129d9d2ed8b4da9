package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
)

// TrustIDs lists the CAs (CAID, each once, in file order) that the
// trusted CA file at path holds.
func TrustIDs(path string) ([]string, error) {
	cs, err := Read(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range cs {
		if id := CAID(c); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// AddTrust makes the trusted CA file at path hold ca too, after what it
// holds (one rename, mode and owner kept); changed is false when it did
// already.
func AddTrust(path string, ca *x509.Certificate) (changed bool, err error) {
	cs, err := Read(path)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(cs, func(c *x509.Certificate) bool { return CAID(c) == CAID(ca) }) {
		return false, nil
	}
	return true, writeCerts(path, append(cs, ca))
}

// DropTrust removes the certificates of the CAs drop from the trusted CA
// file at path, keeping every other CA it holds; it never leaves the file
// empty. changed is false when it held none of them.
func DropTrust(path string, drop []string) (changed bool, err error) {
	cs, err := Read(path)
	if err != nil {
		return false, err
	}
	keep := slices.DeleteFunc(slices.Clone(cs), func(c *x509.Certificate) bool { return slices.Contains(drop, CAID(c)) })
	switch {
	case len(keep) == len(cs):
		return false, nil
	case len(keep) == 0:
		return false, fmt.Errorf("%s holds no other CA than the ones to drop (%v): it would trust nothing", path, drop)
	}
	return true, writeCerts(path, keep)
}

// KeyCAID is CAID of the CA whose private key is at keyFile (read as
// ReadSecret does): what identifies the CA in force while its certificate
// file changes during a rotation.
func KeyCAID(keyFile string) (string, error) {
	b, err := ReadSecret(keyFile)
	if err != nil {
		return "", err
	}
	k, err := parseKey(b)
	if err != nil {
		return "", err
	}
	spki, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return "", err
	}
	return CAID(&x509.Certificate{RawSubjectPublicKeyInfo: spki}), nil
}

func writeCerts(path string, cs []*x509.Certificate) error {
	var out bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return replaceKeeping(path, out.Bytes())
}
