package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// rotationPKI is a TLS cluster whose every host has files of its own
// ({name}): its trusted CA file, its server, peer and agent certificates;
// and a client certificate ("writer") under tls.renew.others, which the
// agents reissue with the rest.
type rotationPKI struct {
	dir string
	ca  *testpki.CA
}

func newRotationPKI(t *testing.T, c *testbed.Cluster) *rotationPKI {
	p := &rotationPKI{dir: filepath.Join(t.TempDir(), "pki"), ca: testpki.NewCA(t, "etcd-ca")}
	testpki.WriteFile(t, filepath.Join(p.dir, "ca.crt"), p.ca.CertPEM)
	testpki.WriteFile(t, filepath.Join(p.dir, "ca.key"), p.ca.KeyPEM)
	for _, m := range c.Members {
		ip := net.ParseIP(m.IP)
		testpki.WriteFile(t, filepath.Join(p.dir, m.Name+"-ca.crt"), p.ca.CertPEM)
		p.ca.Issue(t, m.Name, ip).Write(t, p.dir, m.Name)
		p.ca.Issue(t, m.Name+"-peer", ip, net.ParseIP("127.0.0.1")).Write(t, p.dir, m.Name+"-peer")
		p.ca.Issue(t, "etcdkeeper-agent").Write(t, p.dir, m.Name+"-agent")
	}
	p.ca.Issue(t, "root").Write(t, p.dir, "writer")
	return p
}

func (p *rotationPKI) spec(next string) string {
	s := fmt.Sprintf(`tls:
  client:
    certFile: %[1]s/{name}.crt
    keyFile: %[1]s/{name}.key
    trustedCAFile: %[1]s/{name}-ca.crt
    clientCertAuth: true
  peer:
    certFile: %[1]s/{name}-peer.crt
    keyFile: %[1]s/{name}-peer.key
    trustedCAFile: %[1]s/{name}-ca.crt
    clientCertAuth: true
  agent:
    certFile: %[1]s/{name}-agent.crt
    keyFile: %[1]s/{name}-agent.key
    trustedCAFile: %[1]s/{name}-ca.crt
  ca:
    certFile: %[1]s/ca.crt
    keyFile: %[1]s/ca.key
`, p.dir)
	if next != "" {
		s += fmt.Sprintf("    next:\n      certFile: %[1]s/ca.crt\n      keyFile: %[1]s/ca.key\n", next)
	}
	return s + fmt.Sprintf(`  renew:
    others:
      - name: writer
        certFile: %[1]s/writer.crt
        keyFile: %[1]s/writer.key
`, p.dir)
}

// clientTLS is a client that trusts both CAs (as kube-apiserver does once
// restarted after the first phase) and reads its certificate, which the
// agents reissue, at every handshake.
func (p *rotationPKI) clientTLS(next string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.ca.CertPEM)
	if b, err := os.ReadFile(filepath.Join(next, "ca.crt")); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return &tls.Config{RootCAs: pool, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		pair, err := tls.LoadX509KeyPair(filepath.Join(p.dir, "writer.crt"), filepath.Join(p.dir, "writer.key"))
		return &pair, err
	}}
}

// phaseOf is where member name's files stand: 0 nothing yet, 1 its CA
// file trusts the new CA, 2 its certificates are the new CA's, 3 its CA
// file trusts only the new CA.
func (p *rotationPKI) phaseOf(name string, next *x509.Certificate) int {
	ids, _ := certs.TrustIDs(filepath.Join(p.dir, name+"-ca.crt"))
	id := certs.CAID(next)
	phase := 0
	if strings.Contains(strings.Join(ids, ","), id) {
		phase = 1
	}
	if cs, err := certs.Read(filepath.Join(p.dir, name+"-peer.crt")); err == nil && cs[0].CheckSignatureFrom(next) == nil {
		phase = 2
	}
	if len(ids) == 1 && ids[0] == id {
		phase = 3
	}
	return phase
}

// TestCARotation: a CA rotation of 3 members under a writer, started by
// the spec, goes through its three phases by itself, with an agent killed
// (kill -9) inside each phase, and ends with every member trusting and
// presenting only the new CA: no failed write, at most 2 restarts per
// member whose agent was not killed.
func TestCARotation(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	pki := newRotationPKI(t, c)
	next := filepath.Join(t.TempDir(), "next")
	c.UseTLS(pki.clientTLS(next))
	c.Extra = pki.spec("")
	c.WriteSpec()
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	c.WaitVoters(converge, c.AllNames()...)

	// The new CA, made by the command; then the spec names it.
	out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec, "--new-ca", next).CombinedOutput()
	if err != nil {
		t.Fatalf("rotate-ca --new-ca: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(next, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new CA key: %v %v", fi, err)
	}
	newCA, err := certs.Read(filepath.Join(next, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	c.UseTLS(pki.clientTLS(next))
	w := c.StartWriter("/rotate", 10*time.Second, c.AllNames()...)
	restarts := watchRestarts(c)
	start := time.Now()
	c.Extra = pki.spec(next)
	c.WriteSpec()

	// A kill -9 inside each phase: node1 once a member trusts both, node2
	// once one is reissued, node3 once one dropped the old CA.
	killed := map[string]bool{}
	for _, step := range []struct {
		phase  int
		victim string
	}{{1, "node1"}, {2, "node2"}, {3, "node3"}} {
		testbed.Eventually(t, 60*time.Second, fmt.Sprintf("a member in phase %d", step.phase), func() string {
			for _, m := range c.Members {
				if pki.phaseOf(m.Name, newCA[0]) >= step.phase {
					return ""
				}
			}
			return "none yet"
		})
		t.Logf("phase %d reached after %s: kill -9 the agent of %s", step.phase, time.Since(start).Round(time.Second), step.victim)
		if step.phase == 1 {
			out, _ := exec.Command(testbed.Binary, "plan", "--config", c.Spec).CombinedOutput()
			if !strings.Contains(string(out), "CA rotation (etcdkeeper certs rotate-ca):") {
				t.Errorf("plan does not show the rotation:\n%s", out)
			}
		}
		c.Kill9(step.victim)
		killed[step.victim] = true
		time.Sleep(500 * time.Millisecond)
		c.Start(step.victim)
	}
	testbed.Eventually(t, 4*time.Minute, "the rotation done on every member", func() string {
		out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%v\n%s", err, out)
		}
		for _, m := range c.Members {
			if p := pki.phaseOf(m.Name, newCA[0]); p != 3 {
				return fmt.Sprintf("%s in phase %d", m.Name, p)
			}
		}
		return ""
	})
	took := time.Since(start)
	c.WaitVoters(converge, c.AllNames()...)
	w.Stop()
	restarts.stop()
	counts := restarts.restarts()
	t.Logf("CA rotation of 3 members: %s, %d writes, %d failed (longest stall %s); etcd restarts %v (kill -9 of each agent once, one per phase)",
		took.Round(time.Second), w.OK.Load(), w.Failed.Load(), time.Duration(w.MaxStall.Load()).Round(time.Millisecond), counts)
	if w.Failed.Load() > 0 {
		t.Errorf("%d writes failed during the rotation: %v", w.Failed.Load(), w.LastErr.Load())
	}
	for name, n := range counts {
		// A killed agent's etcd is stopped as a leftover and started again:
		// one restart more than the rotation's own two.
		if limit := 2 + btoi(killed[name]); n > limit {
			t.Errorf("etcd of %s restarted %d times (at most %d)", name, n, limit)
		}
	}
	// Every leaf the agents keep is the new CA's, and etcd takes a client
	// that presents only the new CA's certificate and trusts only it.
	for _, f := range []string{"writer.crt", "node1-agent.crt", "node2.crt", "node3-peer.crt"} {
		cs, err := certs.Read(filepath.Join(pki.dir, f))
		if err != nil || cs[0].CheckSignatureFrom(newCA[0]) != nil {
			t.Errorf("%s is not the new CA's: %v", f, err)
		}
	}
	cli := c.Client()
	testbed.Put(t, cli, "/rotated", "yes")
	testbed.Eventually(t, 30*time.Second, "history shows the rotation's steps", func() string {
		out, _ := exec.Command(testbed.Binary, "history", "--config", c.Spec).CombinedOutput()
		for _, want := range []string{"ca-rotation", "trust both", "reissue", "drop the old CA"} {
			if !strings.Contains(string(out), want) {
				return fmt.Sprintf("no %q in:\n%s", want, out)
			}
		}
		return ""
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
