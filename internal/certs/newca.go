package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// CALifetime is how long a CA that NewCA makes is valid: kubeadm's ten
// years.
const CALifetime = 10 * 365 * 24 * time.Hour

// NewCA makes a CA to rotate to from old: the same subject and key type
// (RSA of the same size, ECDSA on the same curve, Ed25519), a new key,
// valid for CALifetime from now. It writes ca.crt (0644) and ca.key (0600)
// into dir, never over existing files, and returns their paths. The key
// is generated here, on this host, and written nowhere else.
func NewCA(old *x509.Certificate, dir string, now time.Time) (certFile, keyFile string, err error) {
	key, err := keyLike(old.PublicKey)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		RawSubject:            old.RawSubject,
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", "", fmt.Errorf("create the CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encode the CA key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := writeNew(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		_ = os.Remove(keyFile)
		return "", "", err
	}
	return certFile, keyFile, nil
}

// writeNew writes a file that must not exist yet, created with perm (so a
// key is never readable by others, not even for a moment).
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("%w (a CA is never written over an existing file)", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func keyLike(pub crypto.PublicKey) (crypto.Signer, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return rsa.GenerateKey(rand.Reader, max(k.N.BitLen(), 2048))
	case *ecdsa.PublicKey:
		return ecdsa.GenerateKey(k.Curve, rand.Reader)
	case ed25519.PublicKey:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}
