package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// DialSpec dials endpoints the way the spec says the agent of member m
// talks to etcd: with m's tls.agent certificate and, when the spec names
// auth.credentialsFile, as that user.
func DialSpec(s *spec.Spec, m spec.Member, endpoints []string) (*Client, error) {
	tlsCfg, err := TLSConfig(m.TLS.Agent)
	if err != nil {
		return nil, err
	}
	opts := []DialOption{WithCatchUpBound(catchUpBound(s)), WithQuotas(s.Quotas())}
	if s.Auth.CredentialsFile != "" {
		user, password, err := ReadCredentials(s.Auth.CredentialsFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithCredentials(user, password))
	}
	return Dial(endpoints, tlsCfg, opts...)
}

// catchUpBound is model.CatchUpBound of the largest
// snapshot-catchup-entries any member runs with (a member's own flags
// override the cluster's): the leader, whoever it is, keeps at least that
// many entries for slow followers.
func catchUpBound(s *spec.Spec) uint64 {
	const name = "snapshot-catchup-entries"
	var most uint64
	for _, m := range s.Members {
		v, ok := m.Flags[name]
		if !ok {
			v = s.Etcd.Flags[name]
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			most = max(most, n)
		}
	}
	return model.CatchUpBound(most)
}

// TLSConfig is the client TLS config for c: its certificate, presented
// when etcd asks for one, and its CA as the only one trusted (the system's
// CAs when it names none). nil, nil when c names no file: plain http.
func TLSConfig(c spec.TLSClient) (*tls.Config, error) {
	if c.CertFile == "" && c.KeyFile == "" && c.TrustedCAFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TrustedCAFile != "" {
		pem, err := os.ReadFile(c.TrustedCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.agent.trustedCAFile: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.agent.trustedCAFile %s: no PEM certificate in it", c.TrustedCAFile)
		}
	}
	if c.CertFile != "" || c.KeyFile != "" {
		get, err := clientCertificate(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = get
	}
	return cfg, nil
}

// clientCertificate reads the pair again at every handshake, as etcd does
// for its own certificates, so that a renewed certificate is used without
// a restart. A pair that does not load (a renewal half written) leaves
// the last good one in use.
func clientCertificate(certFile, keyFile string) (func(*tls.CertificateRequestInfo) (*tls.Certificate, error), error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.agent: certFile %s and keyFile %s: %w", certFile, keyFile, err)
	}
	var last atomic.Pointer[tls.Certificate]
	last.Store(&pair)
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if p, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
			last.Store(&p)
		}
		return last.Load(), nil
	}, nil
}

// ReadCredentials reads auth.credentialsFile: user:password on the first
// line. No error quotes the file: it holds a password.
func ReadCredentials(path string) (user, password string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("auth.credentialsFile: %w", err)
	}
	user, password, err = spec.ParseCredentials(data)
	if err != nil {
		return "", "", fmt.Errorf("auth.credentialsFile %s: %w", path, err)
	}
	return user, password, nil
}
