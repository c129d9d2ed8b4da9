// Command mkcerts writes the e2e test bed's short-lived certificates: a CA
// (ca.crt, ca.key) and a client certificate it issued (NAME.crt,
// NAME.key) that lives -life, for the agents to renew. Only make e2e uses
// it: the test hosts need no openssl.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "where to write the files")
	name := flag.String("name", "client", "the client certificate's file name and common name")
	life := flag.Duration("life", time.Minute, "the client certificate's lifetime")
	flag.Parse()
	if err := write(*dir, *name, *life); err != nil {
		fmt.Fprintln(os.Stderr, "mkcerts:", err)
		os.Exit(1)
	}
}

func write(dir, name string, life time.Duration) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "e2e etcd CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: name},
		NotBefore: now, NotAfter: now.Add(life), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		typ  string
		der  func() ([]byte, error)
		mode os.FileMode
	}{
		{"ca.crt", "CERTIFICATE", func() ([]byte, error) { return caDER, nil }, 0o644},
		{"ca.key", "PRIVATE KEY", func() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(caKey) }, 0o600},
		{name + ".crt", "CERTIFICATE", func() ([]byte, error) { return der, nil }, 0o644},
		{name + ".key", "PRIVATE KEY", func() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(key) }, 0o600},
	} {
		b, err := f.der()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: b}), f.mode); err != nil {
			return err
		}
	}
	return nil
}
