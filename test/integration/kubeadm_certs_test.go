package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/kubeadm"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// kubeadmLife is the lifetime of the kubeadm-shaped certificates here:
// kubeadm's year, compressed.
const kubeadmLife = 40 * time.Second

// kubeadmHost writes host m's kubeadm PKI under root/<name>/etc/kubernetes/pki
// (kubeadm's layout and names, RSA 2048 keys, its subjects and usages;
// every host has the etcd CA and its key, as kubeadm's control-plane hosts
// do) and returns that pki dir.
func kubeadmHost(t *testing.T, ca *testpki.CA, root string, m testbed.Member) string {
	pki := filepath.Join(root, m.Name, "etc", "kubernetes", "pki")
	etcd := filepath.Join(pki, "etcd")
	ip := net.ParseIP(m.IP)
	testpki.WriteFile(t, filepath.Join(etcd, "ca.crt"), ca.CertPEM)
	testpki.WriteFile(t, filepath.Join(etcd, "ca.key"), ca.KeyPEM)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	ca.IssueFor(t, m.Name, kubeadmLife, both, ip, net.ParseIP("127.0.0.1")).Write(t, etcd, "server")
	ca.IssueFor(t, m.Name, kubeadmLife, both, ip, net.ParseIP("127.0.0.1")).Write(t, etcd, "peer")
	ca.IssueFor(t, "kube-etcd-healthcheck-client", kubeadmLife, client).Write(t, etcd, "healthcheck-client")
	ca.IssueFor(t, "kube-apiserver-etcd-client", kubeadmLife, client).Write(t, pki, "apiserver-etcd-client")
	return pki
}

// kubeadmTLS is the tls: section `etcdkeeper import kubeadm` writes
// (kubeadm.KubeadmPKI: the manifest's flags, healthcheck-client for the
// agent, the etcd CA, apiserver-etcd-client under renew.others), each
// host's root standing in for its /.
func kubeadmTLS(root string, next string) string {
	p := kubeadm.KubeadmPKI(path.Join(root, "{name}", "etc", "kubernetes", "pki", "etcd"))
	o := p.Others[0]
	s := fmt.Sprintf(`tls:
  client:
    certFile: %[1]s/server.crt
    keyFile: %[1]s/server.key
    trustedCAFile: %[2]s
    clientCertAuth: true
  peer:
    certFile: %[1]s/peer.crt
    keyFile: %[1]s/peer.key
    trustedCAFile: %[2]s
    clientCertAuth: true
  agent:
    certFile: %[3]s
    keyFile: %[4]s
    trustedCAFile: %[2]s
  ca:
    certFile: %[5]s
    keyFile: %[6]s
`, path.Dir(p.CertFile), p.TrustedCAFile, p.CertFile, p.KeyFile, p.CA.CertFile, p.CA.KeyFile)
	if next != "" {
		s += fmt.Sprintf("    next:\n      certFile: %[1]s/ca.crt\n      keyFile: %[1]s/ca.key\n      waitForClients: true\n", next)
	}
	return s + fmt.Sprintf("  renew:\n    others:\n      - name: %s\n        certFile: %s\n        keyFile: %s\n", o.Name, o.CertFile, o.KeyFile)
}

// apiserver is a stand-in for kube-apiserver's etcd client: built as
// k8s.io/apiserver's storage factory builds it (client/pkg transport's
// TLSInfo: the CA read once, the client certificate at every handshake),
// writing through its host's member until stopped.
type apiserver struct {
	cli            *clientv3.Client
	ok, failed     atomic.Int64
	stop, finished chan struct{}
	lastErr        atomic.Value
}

func startAPIServer(t *testing.T, pki string, endpoint string) *apiserver {
	info := transport.TLSInfo{CertFile: filepath.Join(pki, "apiserver-etcd-client.crt"), KeyFile: filepath.Join(pki, "apiserver-etcd-client.key"),
		TrustedCAFile: filepath.Join(pki, "etcd", "ca.crt")}
	cfg, err := info.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	a := &apiserver{cli: cli, stop: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(a.finished)
		for i := 0; ; i++ {
			select {
			case <-a.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var err error
			for try := 0; try < 100; try++ { // a leader change, a member restarting: up to 10 s
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err = cli.Put(ctx, fmt.Sprintf("/registry/k%d", i%50), "v")
				cancel()
				if err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				a.failed.Add(1)
				a.lastErr.Store(err.Error())
			} else {
				a.ok.Add(1)
			}
		}
	}()
	return a
}

func (a *apiserver) shutdown() (ok, failed int64) {
	close(a.stop)
	<-a.finished
	_ = a.cli.Close()
	return a.ok.Load(), a.failed.Load()
}

// TestKubeadmCertificates: a cluster with kubeadm's PKI layout, flags and
// RSA keys, with the spec `import kubeadm` writes, keeps every certificate
// renewed (etcd's, healthcheck-client, kube-apiserver's
// apiserver-etcd-client) with no restart, then rotates its CA with
// tls.ca.next.waitForClients: the agents wait until every member trusts
// both CAs, the kube-apiservers are restarted (their client read the CA
// once), the operator says --clients-ready, and the rotation finishes, the
// kube-apiservers writing through it all with their renewed and reissued
// client certificates.
func TestKubeadmCertificates(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	root := t.TempDir()
	ca := testpki.NewRSACA(t, "etcd-ca")
	pkis := map[string]string{}
	for _, m := range c.Members {
		pkis[m.Name] = kubeadmHost(t, ca, root, m)
	}
	c.UseTLS(testClientTLS(t, filepath.Join(pkis["node1"], "etcd", "healthcheck-client"), filepath.Join(pkis["node1"], "etcd", "ca.crt")))
	c.Extra = kubeadmTLS(root, "")
	c.WriteSpec()
	start := time.Now()
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	c.WaitVoters(converge, c.AllNames()...)
	apis := map[string]*apiserver{}
	for _, m := range c.Members {
		apis[m.Name] = startAPIServer(t, pkis[m.Name], m.ClientURL())
	}
	restarts := watchRestarts(c)

	// Renewal: past the first certificates' expiry, every one renewed.
	first := notAfter(filepath.Join(pkis["node2"], "apiserver-etcd-client.crt"))
	testbed.Eventually(t, converge+2*kubeadmLife, "every kubeadm certificate renewed past the first expiry", func() string {
		if time.Now().Before(first.Add(2 * time.Second)) {
			return "the first certificates have not expired yet"
		}
		for name, pki := range pkis {
			for _, f := range []string{"etcd/server.crt", "etcd/peer.crt", "etcd/healthcheck-client.crt", "apiserver-etcd-client.crt"} {
				if got := notAfter(filepath.Join(pki, f)); !got.After(time.Now()) {
					return fmt.Sprintf("%s %s expires %s", name, f, got.Format(time.RFC3339))
				}
			}
		}
		return ""
	})
	renewedFor := time.Since(start)
	if n := restarts.restarts(); n["node1"]+n["node2"]+n["node3"] > 0 {
		t.Fatalf("etcd restarted while certificates were renewed: %v", n)
	}

	// CA rotation, kubeadm's way: the new CA next to the old on each
	// host, waitForClients for the kube-apiservers.
	next := filepath.Join(root, "next")
	if out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec, "--new-ca", next).CombinedOutput(); err != nil {
		t.Fatalf("rotate-ca --new-ca: %v\n%s", err, out)
	}
	newCA, err := certs.Read(filepath.Join(next, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if newCA[0].PublicKeyAlgorithm != x509.RSA {
		t.Errorf("the new CA's key is %v, want RSA like kubeadm's", newCA[0].PublicKeyAlgorithm)
	}
	c.UseTLS(testClientTLS(t, filepath.Join(pkis["node1"], "etcd", "healthcheck-client"), filepath.Join(pkis["node1"], "etcd", "ca.crt"), filepath.Join(next, "ca.crt")))
	rotStart := time.Now()
	c.Extra = kubeadmTLS(root, next)
	c.WriteSpec()
	// Every member trusts both; the rotation then holds for the clients.
	testbed.Eventually(t, 3*time.Minute, "every member trusting both CAs, the rotation waiting for the clients", func() string {
		out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec).CombinedOutput()
		if exitCodeOf(err) != 2 || strings.Count(string(out), "--clients-ready") < 3 {
			return fmt.Sprintf("%v\n%s", err, out)
		}
		return ""
	})
	// The agents must not have reissued anything while they waited.
	for name, pki := range pkis {
		if cs, _ := certs.Read(filepath.Join(pki, "etcd", "server.crt")); cs[0].CheckSignatureFrom(newCA[0]) == nil {
			t.Fatalf("%s's server certificate was reissued before --clients-ready", name)
		}
	}
	// "Restart" each kube-apiserver: its etcd client reads ca.crt, now both CAs.
	var apiOK, apiFailed int64
	for _, m := range c.Members {
		ok, failed := apis[m.Name].shutdown()
		apiOK, apiFailed = apiOK+ok, apiFailed+failed
		apis[m.Name] = startAPIServer(t, pkis[m.Name], m.ClientURL())
	}
	if out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec, "--clients-ready").CombinedOutput(); err != nil {
		t.Fatalf("rotate-ca --clients-ready: %v\n%s", err, out)
	}
	// The agents reissue, then hold the drop for the other clients.
	testbed.Eventually(t, 3*time.Minute, "every member reissued, the drop waiting for the clients", func() string {
		out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec).CombinedOutput()
		if exitCodeOf(err) != 2 || strings.Count(string(out), "once more") < 3 {
			return fmt.Sprintf("%v\n%s", err, out)
		}
		return ""
	})
	for name, pki := range pkis {
		if ids, _ := certs.TrustIDs(filepath.Join(pki, "etcd", "ca.crt")); len(ids) != 2 {
			t.Fatalf("%s's ca.crt holds %v before the second --clients-ready, want both CAs", name, ids)
		}
	}
	if out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec, "--clients-ready").CombinedOutput(); err != nil || !strings.Contains(string(out), "drop the old CA") {
		t.Fatalf("rotate-ca --clients-ready, the second time: %v\n%s", err, out)
	}
	testbed.Eventually(t, 3*time.Minute, "the rotation done on every member", func() string {
		out, err := exec.Command(testbed.Binary, "certs", "rotate-ca", "--config", c.Spec).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%v\n%s", err, out)
		}
		return ""
	})
	rotated := time.Since(rotStart)
	for _, m := range c.Members {
		ok, failed := apis[m.Name].shutdown()
		apiOK, apiFailed = apiOK+ok, apiFailed+failed
	}
	restarts.stop()
	counts := restarts.restarts()
	t.Logf("kubeadm-shaped: certificates renewed past their first expiry in %s with no restart; CA rotated in %s (with the wait for the kube-apiservers); etcd restarts %v; kube-apiserver writes %d, %d failed",
		renewedFor.Round(time.Second), rotated.Round(time.Second), counts, apiOK, apiFailed)
	if apiFailed > 0 {
		t.Errorf("%d kube-apiserver writes failed: %v", apiFailed, apis["node1"].lastErr.Load())
	}
	for name, n := range counts {
		if n > 2 {
			t.Errorf("etcd of %s restarted %d times in the rotation (at most 2)", name, n)
		}
	}
	// After the rotation: ca.crt holds only the new CA, and a kube-apiserver
	// started now connects with its reissued client certificate.
	for name, pki := range pkis {
		ids, _ := certs.TrustIDs(filepath.Join(pki, "etcd", "ca.crt"))
		if len(ids) != 1 || ids[0] != certs.CAID(newCA[0]) {
			t.Errorf("%s's ca.crt holds %v, want only the new CA", name, ids)
		}
		cs, _ := certs.Read(filepath.Join(pki, "apiserver-etcd-client.crt"))
		if cs[0].CheckSignatureFrom(newCA[0]) != nil {
			t.Errorf("%s's apiserver-etcd-client is not the new CA's", name)
		}
	}
	a := startAPIServer(t, pkis["node3"], c.Member("node3").ClientURL())
	testbed.Eventually(t, 30*time.Second, "a kube-apiserver started after the rotation writes", func() string {
		if a.ok.Load() == 0 {
			return fmt.Sprintf("no write yet (%v)", a.lastErr.Load())
		}
		return ""
	})
	a.shutdown()
}

// testClientTLS is the test's own client: it trusts the CAs in caFiles
// (read now) and presents the pair at pair.crt/pair.key, read at every
// handshake (the agents renew it).
func testClientTLS(t *testing.T, pair string, caFiles ...string) *tls.Config {
	pool := x509.NewCertPool()
	for _, f := range caFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	return &tls.Config{RootCAs: pool, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		p, err := tls.LoadX509KeyPair(pair+".crt", pair+".key")
		return &p, err
	}}
}
