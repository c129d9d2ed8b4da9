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

// TrustOnly makes the trusted CA file at path hold only the certificates
// of the CA id, which it must hold already: never an empty file, never a
// CA it did not trust. changed is false when it held nothing else.
func TrustOnly(path, id string) (changed bool, err error) {
	cs, err := Read(path)
	if err != nil {
		return false, err
	}
	keep := slices.DeleteFunc(slices.Clone(cs), func(c *x509.Certificate) bool { return CAID(c) != id })
	switch {
	case len(keep) == 0:
		return false, fmt.Errorf("%s does not hold the CA %s: nothing to keep", path, id)
	case len(keep) == len(cs):
		return false, nil
	}
	return true, writeCerts(path, keep)
}

func writeCerts(path string, cs []*x509.Certificate) error {
	var out bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return replaceKeeping(path, out.Bytes())
}
