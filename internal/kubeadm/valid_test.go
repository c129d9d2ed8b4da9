package kubeadm

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestImportedSpecsAreValid loads every golden case's spec with spec.Parse,
// the agent's own loader, with its TLS files pointed at a real certificate:
// nothing may be wrong with it.
func TestImportedSpecsAreValid(t *testing.T) {
	cert, key := writeCert(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ToSpec(loadManifests(t, tc.manifests), KubeadmPKI(pkiDir))
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, d, cert, key)
		})
	}
	for _, tc := range liveGoldenCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ToSpecLive(loadManifests(t, tc.manifests), tc.live, KubeadmPKI(pkiDir))
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, d, cert, key)
		})
	}
}

// checkValid loads d with spec.Parse, its TLS files pointed at cert and
// key, and compares what the agent would run with d.
func checkValid(t *testing.T, d Document, cert, key string) {
	t.Helper()
	d.TLS.Client.CertFile, d.TLS.Client.KeyFile, d.TLS.Client.TrustedCAFile = cert, key, cert
	d.TLS.Peer.CertFile, d.TLS.Peer.KeyFile, d.TLS.Peer.TrustedCAFile = cert, key, cert
	d.TLS.Agent.CertFile, d.TLS.Agent.KeyFile, d.TLS.Agent.TrustedCAFile = cert, key, cert
	d.TLS.CA = spec.TLSCA{} // the CA's own checks: internal/spec's TestRenewSpec
	for i := range d.TLS.Renew.Others {
		d.TLS.Renew.Others[i].CertFile, d.TLS.Renew.Others[i].KeyFile = cert, key
	}
	s, err := spec.Parse(render(t, d), filepath.Join(t.TempDir(), "cluster.yaml"))
	if err != nil {
		t.Fatalf("spec.Parse:\n%v", err)
	}
	if len(s.Members) != len(d.Members) {
		t.Fatalf("%d members, want %d", len(s.Members), len(d.Members))
	}
	for i, m := range s.Members {
		want := d.Members[i]
		if m.Name != want.Name || !reflect.DeepEqual(m.PeerURLs, want.PeerURLs) || !reflect.DeepEqual(m.ClientURLs, want.ClientURLs) ||
			!reflect.DeepEqual(m.ListenClientURLs, want.ListenClientURLs) ||
			(want.ListenPeerURLs != nil && !reflect.DeepEqual(m.ListenPeerURLs, want.ListenPeerURLs)) {
			t.Errorf("member %d = %+v, want %+v", i, m, want)
		}
		// kubeadm's data dir as it is, on every member: its own
		// when it differs from the others'.
		dir := cmp.Or(want.DataDir, d.DataDir)
		if m.DataDir != dir || m.BackupDir != filepath.Join(dir, spec.BackupSubdir) {
			t.Errorf("member %s: data dir %s, backup dir %s, want %s and %s inside it", m.Name, m.DataDir, m.BackupDir, dir, spec.BackupSubdir)
		}
		for _, f := range want.Flags {
			if m.Flags[f.Name] != f.Value {
				t.Errorf("member %s: flags %s = %q, want %q", m.Name, f.Name, m.Flags[f.Name], f.Value)
			}
		}
	}
	for _, f := range d.Flags {
		if s.Etcd.Flags[f.Name] != f.Value {
			t.Errorf("etcd.flags %s = %q, want %q", f.Name, s.Etcd.Flags[f.Name], f.Value)
		}
	}
	if !s.TLS.Client.ClientCertAuth || !s.TLS.Peer.ClientCertAuth {
		t.Errorf("clientCertAuth lost: %+v", s.TLS)
	}
}

// TestUnreadableFilesAreTheOnlyProblems: imported with kubeadm's paths on a
// machine without them, the spec's only problems are those files.
func TestUnreadableFilesAreTheOnlyProblems(t *testing.T) {
	if _, err := os.Stat(pkiDir); err == nil {
		t.Skip(pkiDir + " exists here")
	}
	d, err := ToSpec(loadManifests(t, []string{"cp1.yaml", "cp2.yaml", "cp3.yaml"}), KubeadmPKI(pkiDir))
	if err != nil {
		t.Fatal(err)
	}
	_, err = spec.Parse(render(t, d), "cluster.yaml")
	var errs *spec.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("spec.Parse = %v, want problems with the missing files", err)
	}
	files, others := SplitProblems(*errs, d.Files())
	if len(others) > 0 {
		t.Errorf("problems other than files:\n%v", &others)
	}
	if len(files) == 0 {
		t.Error("no problem with the missing files")
	}
}

func TestSplitProblems(t *testing.T) {
	errs := spec.Errors{
		{File: "f", Line: 1, Msg: `tls.client.certFile: "/etc/kubernetes/pki/etcd/server.crt": cannot read it: no such file or directory`},
		{File: "f", Line: 2, Msg: `members[0].peerURLs[0]: "x": not a URL`},
		{File: "f", Line: 3, Msg: `tls.peer.certFile: "/etc/kubernetes/pki/etcd/server.crt.old": cannot read it: permission denied`},
	}
	files, others := SplitProblems(errs, []string{"/etc/kubernetes/pki/etcd/server.crt"})
	if len(files) != 1 || files[0].Line != 1 {
		t.Errorf("files = %v, want line 1 only", files)
	}
	if len(others) != 2 {
		t.Errorf("others = %v, want lines 2 and 3", others)
	}
}

// TestKeeperGatesAreEtcdprocDefaults keeps keeperGates equal to the gates
// etcdkeeper gives etcd when etcd.flags sets none.
func TestKeeperGatesAreEtcdprocDefaults(t *testing.T) {
	s := &spec.Spec{Cluster: spec.Cluster{Name: "c"}}
	var got string
	for _, a := range etcdproc.Flags(s, spec.Member{Name: "m"}, etcdproc.Bootstrap{}) {
		if v, ok := strings.CutPrefix(a, "--feature-gates="); ok {
			got = v
		}
	}
	if !reflect.DeepEqual(parseGates(got), keeperGates) {
		t.Errorf("etcdproc sets --feature-gates=%s, keeperGates is %s: make them equal", got, formatGates(keeperGates))
	}
}

// writeCert writes a self-signed certificate, usable as CA, server and
// client certificate, and its key: cp1's, valid for a year, as kubeadm
// issues them (on each host the shared path is that host's certificate).
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcd-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("10.0.0.11"), net.ParseIP("127.0.0.1")},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
