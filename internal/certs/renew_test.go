package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

func TestRenewAt(t *testing.T) {
	day := 24 * time.Hour
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		life   time.Duration
		before time.Duration
		want   time.Duration // before expiry
	}{
		{"a year: a third first", 365 * day, 0, 365 * day / 3},
		{"60 days: 30 days first", 60 * day, 0, 30 * day},
		{"90 days: both at 30", 90 * day, 0, 30 * day},
		{"5 minutes: never before half", 5 * time.Minute, 0, 150 * time.Second},
		{"set: as set", 365 * day, 10 * day, 10 * day},
		{"set beyond half: half", 10 * day, 9 * day, 5 * day},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(tt.life)}
			if got := c.NotAfter.Sub(RenewAt(c, tt.before)); got != tt.want {
				t.Errorf("renewed %v before expiry, want %v", got, tt.want)
			}
		})
	}
}

// pki is a CA on disk and one leaf it issued.
type pki struct {
	dir            string
	ca             *testpki.CA
	caCert, caKey  string
	leaf           Leaf
	oldPEM, keyPEM []byte
}

func newPKI(t *testing.T, life time.Duration, ekus []x509.ExtKeyUsage) pki {
	t.Helper()
	return newPKIIn(t, t.TempDir(), life, ekus)
}

func newPKIIn(t *testing.T, dir string, life time.Duration, ekus []x509.ExtKeyUsage) pki {
	t.Helper()
	ca := testpki.NewCA(t, "etcd-ca")
	p := pki{dir: dir, ca: ca, caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key")}
	testpki.WriteFile(t, p.caCert, ca.CertPEM)
	testpki.WriteFile(t, p.caKey, ca.KeyPEM)
	pair := ca.IssueFor(t, "node1", life, ekus, net.ParseIP("127.0.0.1"))
	cert, key := pair.Write(t, dir, "node1")
	if err := os.Chmod(cert, 0o644); err != nil {
		t.Fatal(err)
	}
	p.leaf = Leaf{Role: "peer", CertFile: cert, KeyFile: key, Hosts: []string{"127.0.0.1", "127.0.0.9", "node1.example"}}
	p.oldPEM, p.keyPEM = pair.CertPEM, pair.KeyPEM
	return p
}

func (p pki) issuer(t *testing.T) *Issuer {
	t.Helper()
	iss, err := LoadIssuer(p.caCert, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

func TestRenewKeepsWhatTheCertificateSays(t *testing.T) {
	ekus := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	p := newPKI(t, 10*time.Minute, ekus)
	now := time.Now().Add(8 * time.Minute)
	r, err := Renew(p.leaf, p.issuer(t), now)
	if err != nil {
		t.Fatal(err)
	}
	old, next := r.Old, r.New
	if !bytes.Equal(old.RawSubject, next.RawSubject) {
		t.Errorf("subject %q, want %q", next.Subject, old.Subject)
	}
	if !slices.Equal(next.ExtKeyUsage, ekus) || next.KeyUsage != old.KeyUsage {
		t.Errorf("usages %v/%v, want %v/%v", next.ExtKeyUsage, next.KeyUsage, ekus, old.KeyUsage)
	}
	if got, want := next.NotAfter.Sub(next.NotBefore), old.NotAfter.Sub(old.NotBefore); got != want {
		t.Errorf("lifetime %v, want %v", got, want)
	}
	if !next.NotAfter.After(old.NotAfter) {
		t.Errorf("expires %v, not after the old %v", next.NotAfter, old.NotAfter)
	}
	if next.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Error("same serial")
	}
	for _, h := range []string{"node1", "127.0.0.1", "127.0.0.9", "node1.example"} {
		if err := next.VerifyHostname(h); err != nil {
			t.Errorf("does not name %s: %v", h, err)
		}
	}
	if err := next.CheckSignatureFrom(p.issuer(t).Cert); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}
	// The key is the same, and the file on disk is the new certificate.
	key, _ := os.ReadFile(p.leaf.KeyFile)
	if !bytes.Equal(key, p.keyPEM) {
		t.Error("the key file changed")
	}
	onDisk, _ := os.ReadFile(p.leaf.CertFile)
	pair, err := tls.X509KeyPair(onDisk, key)
	if err != nil {
		t.Fatalf("the renewed pair does not load: %v", err)
	}
	if !bytes.Equal(pair.Certificate[0], next.Raw) {
		t.Error("the file does not hold the renewed certificate")
	}
	fi, _ := os.Stat(p.leaf.CertFile)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want the old 0644", fi.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(p.dir, ".*"))
	if len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestRenewRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, p *pki)
		want  string
		is    error
	}{
		{"another CA issued it", func(t *testing.T, p *pki) {
			other := testpki.NewCA(t, "other-ca")
			testpki.WriteFile(t, p.leaf.CertFile, other.Issue(t, "node1").CertPEM)
		}, "not issued by this CA", ErrNotIssued},
		{"the leaf's key is readable by others", func(t *testing.T, p *pki) {
			_ = os.Chmod(p.leaf.KeyFile, 0o644)
		}, "chmod 600", ErrKeyExposed},
		{"certificate and key are not a pair", func(t *testing.T, p *pki) {
			testpki.WriteFile(t, p.leaf.KeyFile, p.ca.Issue(t, "x").KeyPEM)
		}, "not a pair", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPKI(t, time.Hour, nil)
			iss := p.issuer(t)
			tt.setup(t, &p)
			before, _ := os.ReadFile(p.leaf.CertFile)
			_, err := Renew(p.leaf, iss, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			after, _ := os.ReadFile(p.leaf.CertFile)
			if !bytes.Equal(before, after) {
				t.Error("the certificate file changed")
			}
		})
	}
}

func TestLoadIssuerRefusesAnExposedKey(t *testing.T) {
	p := newPKI(t, time.Hour, nil)
	if err := os.Chmod(p.caKey, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := LoadIssuer(p.caCert, p.caKey)
	if !errors.Is(err, ErrKeyExposed) {
		t.Fatalf("err = %v, want ErrKeyExposed", err)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatal("the error shows the key")
	}
	// A key that is not the CA's is refused too.
	testpki.WriteFile(t, p.caKey, p.keyPEM)
	_ = os.Chmod(p.caKey, 0o600)
	if _, err := LoadIssuer(p.caCert, p.caKey); err == nil || !strings.Contains(err.Error(), "goes with the key") {
		t.Fatalf("err = %v, want the key not the CA's", err)
	}
}

func TestRenewalsRound(t *testing.T) {
	p := newPKI(t, 10*time.Minute, nil)
	ca := []CA{{CertFile: p.caCert, KeyFile: p.caKey}}
	absent := Leaf{Role: "apiserver-etcd-client", CertFile: filepath.Join(p.dir, "none.crt"), KeyFile: filepath.Join(p.dir, "none.key")}
	leaves := []Leaf{p.leaf, absent}

	// Not due yet: nothing renewed, the next renewal at half the lifetime.
	r := Renewals(leaves, ca, Options{}, time.Now())
	if len(r.Renewed) != 0 || len(r.Failed) != 0 {
		t.Fatalf("renewed %d, failed %v; want nothing", len(r.Renewed), r.Failed)
	}
	if got := r.Status[0]; got.RenewedBy != "the agent, with tls.ca" || got.RenewAt.IsZero() || !r.Next.Equal(got.RenewAt) {
		t.Errorf("status %+v, next %v", got, r.Next)
	}
	if !r.Status[1].Absent {
		t.Errorf("absent leaf: %+v", r.Status[1])
	}
	// Due, but only checked: the file stays.
	later := r.Next.Add(time.Second)
	if r := Renewals(leaves, ca, Options{Check: true}, later); len(r.Renewed) != 0 {
		t.Fatal("a check renewed")
	}
	// Due: renewed, the next renewal later.
	r2 := Renewals(leaves, ca, Options{}, later)
	if len(r2.Renewed) != 1 || len(r2.Failed) != 0 || !r2.Next.After(r.Next) {
		t.Fatalf("renewed %d, failed %v, next %v (was %v)", len(r2.Renewed), r2.Failed, r2.Next, r.Next)
	}
	// Forced: renewed although not due.
	if r3 := Renewals(leaves, ca, Options{Force: true}, time.Now()); len(r3.Renewed) != 1 {
		t.Fatalf("forced: renewed %d", len(r3.Renewed))
	}
	// Without the key on the host: nothing renews, and status says so.
	r4 := Renewals(leaves, []CA{{CertFile: p.caCert, KeyFile: filepath.Join(p.dir, "gone.key")}}, Options{}, later.Add(time.Hour))
	if len(r4.Renewed) != 0 || len(r4.Failed) != 0 || !strings.Contains(r4.Status[0].RenewedBy, "not on this host") || !r4.Next.IsZero() {
		t.Fatalf("without the key: %+v", r4)
	}
	// An exposed CA key: a failure, not a silent nothing.
	_ = os.Chmod(p.caKey, 0o644)
	if r5 := Renewals(leaves, ca, Options{}, later.Add(time.Hour)); len(r5.Failed) != 1 || len(r5.Renewed) != 0 {
		t.Fatalf("exposed CA key: failed %v, renewed %d", r5.Failed, len(r5.Renewed))
	}
}

// TestNobodyReadsAKeyDuringRenewal: an unprivileged local user (uid
// 65534) can read neither the leaf's key nor the CA's while renewals run,
// and no file the renewal writes in the directory is readable by them
// but the certificate itself.
func TestNobodyReadsAKeyDuringRenewal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as uid 65534")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	// The dir (and /tmp above it) must be traversable by nobody, or every
	// read fails for that reason alone (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "renew-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPKIIn(t, dir, time.Hour, nil)
	iss := p.issuer(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if _, err := Renew(p.leaf, iss, time.Now()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Read every key-looking file and every temp file as nobody, over
	// and over while the renewals run.
	// (A temp file of the certificate, 0644 like the certificate itself,
	// may be read: it holds no secret.)
	script := `for i in $(seq 1 200); do for f in ` + p.dir + `/*.key ` + p.dir + `/.*[0-9]; do [ -f "$f" ] && cat "$f" 2>/dev/null; done; done; true`
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput()
	<-done
	if err != nil {
		t.Fatalf("as nobody: %v: %s", err, out)
	}
	if bytes.Contains(out, []byte("PRIVATE KEY")) {
		t.Fatalf("uid 65534 read a key:\n%s", out)
	}
	// The certificate itself stays readable (etcd's user, kube-apiserver).
	if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", p.leaf.CertFile).CombinedOutput(); err != nil {
		t.Fatalf("the renewed certificate is not readable: %v: %s", err, out)
	}
}

// TestRenewTakesAGroupReadableLeafKey: root:etcd 0640 is a common layout
// for etcd's keys; renewal reads such a key (never one others may read).
func TestRenewTakesAGroupReadableLeafKey(t *testing.T) {
	p := newPKI(t, time.Hour, nil)
	if err := os.Chmod(p.leaf.KeyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Renew(p.leaf, p.issuer(t), time.Now()); err != nil {
		t.Fatalf("a 0640 leaf key: %v", err)
	}
}
