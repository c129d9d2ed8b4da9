package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// renewalRun is the lifetime of the renewal test's certificates (the
// agents renew them at half of it) and for how many lifetimes it runs:
// 20 s and until the first ones expired in make test; `make bench-certs`
// sets ETCDKEEPER_CERT_LIFETIME=2m ETCDKEEPER_CERT_LIFETIMES=4.
func renewalRun(t *testing.T) (life time.Duration, lifetimes int) {
	life, lifetimes = 20*time.Second, 1
	if v := os.Getenv("ETCDKEEPER_CERT_LIFETIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ETCDKEEPER_CERT_LIFETIME: %v", err)
		}
		life = d
	}
	if v := os.Getenv("ETCDKEEPER_CERT_LIFETIMES"); v != "" {
		if _, err := fmt.Sscan(v, &lifetimes); err != nil {
			t.Fatalf("ETCDKEEPER_CERT_LIFETIMES: %v", err)
		}
	}
	return life, lifetimes
}

var bothUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}

// issueShort writes member m's client-port and peer certificates with a
// lifetime of life.
func (p *clusterPKI) issueShort(t *testing.T, m testbed.Member, life time.Duration) {
	ip := net.ParseIP(m.IP)
	p.ca.IssueFor(t, m.Name, life, bothUsages, ip).Write(t, p.dir, m.Name)
	p.ca.IssueFor(t, m.Name+"-peer", life, bothUsages, ip, net.ParseIP("127.0.0.1")).Write(t, p.dir, m.Name+"-peer")
}

// renewSpec is tls.ca with the CA's key on the host, and kube-apiserver's
// client certificate under renew.others.
func (p *clusterPKI) renewSpec() string {
	return fmt.Sprintf(`  ca:
    certFile: %[1]s/ca.crt
    keyFile: %[1]s/ca.key
  renew:
    others:
      - name: apiserver-etcd-client
        certFile: %[1]s/apiserver-etcd-client.crt
        keyFile: %[1]s/apiserver-etcd-client.key
`, p.dir)
}

// notAfter is the expiry of the certificate in path (zero if unreadable).
func notAfter(path string) time.Time {
	cs, err := certs.Read(path)
	if err != nil {
		return time.Time{}
	}
	return cs[0].NotAfter
}

// TestCertRenewal: with the CA's key on the host, the agents renew every
// leaf certificate (etcd's client and peer certificates, their own, and
// kube-apiserver's etcd client certificate) before it expires, with no
// restart of etcd, no failed handshake and no failed write, while a
// writer and a prober that opens new TLS connections run; a client set up
// the way kube-apiserver sets up its etcd client (client/pkg transport's
// TLSInfo) connects with the renewed certificate after the first one
// expired.
func TestCertRenewal(t *testing.T) {
	t.Parallel()
	shortLived, lifetimes := renewalRun(t)
	c := testbed.New(t, 3)
	pki := newClusterPKI(t)
	testpki.WriteFile(t, filepath.Join(pki.dir, "ca.key"), pki.ca.KeyPEM)
	start := time.Now()
	for _, m := range c.Members {
		pki.issueShort(t, m, shortLived)
	}
	pki.ca.IssueFor(t, "etcdkeeper-agent", shortLived, bothUsages).Write(t, pki.dir, "agent")
	pki.ca.IssueFor(t, "kube-apiserver-etcd-client", shortLived, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}).Write(t, pki.dir, "apiserver-etcd-client")
	c.UseTLS(pki.clientTLS(t, true))
	c.Extra = pki.spec() + pki.renewSpec()
	c.WriteSpec()
	files := []string{filepath.Join(pki.dir, "agent.crt"), filepath.Join(pki.dir, "apiserver-etcd-client.crt")}
	for _, m := range c.Members {
		files = append(files, filepath.Join(pki.dir, m.Name+".crt"), filepath.Join(pki.dir, m.Name+"-peer.crt"))
	}
	first := map[string]time.Time{}
	for _, f := range files {
		first[f] = notAfter(f)
	}
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	c.WaitVoters(converge, c.AllNames()...)
	pids := map[string]int{}
	for _, m := range c.Members {
		pids[m.Name] = c.EtcdPID(m.Name)
	}

	load := startTLSLoad(t, c, pki)
	// Two renewals of every certificate: the first ones have expired, and
	// the renewed ones were renewed again.
	testbed.Eventually(t, converge+time.Duration(lifetimes+2)*shortLived, "every certificate renewed twice", func() string {
		for _, f := range files {
			if got := notAfter(f); got.Before(first[f].Add(shortLived - 5*time.Second)) {
				return fmt.Sprintf("%s expires %s (first %s)", filepath.Base(f), got.Format(time.RFC3339), first[f].Format(time.RFC3339))
			}
		}
		if time.Now().Before(start.Add(time.Duration(lifetimes)*shortLived + time.Second)) {
			return fmt.Sprintf("not %d lifetimes yet", lifetimes)
		}
		return ""
	})
	writes, failedWrites, handshakes, failedHandshakes := load.stop()
	renewals := 0
	for _, m := range c.Members {
		renewals += c.LogCount(m.Name, "certificate renewed")
	}
	t.Logf("renewal over %s (%d lifetimes of %s): %d renewals by the agents; %d writes, %d failed; %d new TLS handshakes, %d failed",
		time.Since(start).Round(time.Second), int(time.Since(start)/shortLived), shortLived, renewals, writes, failedWrites, handshakes, failedHandshakes)
	if failedWrites > 0 || failedHandshakes > 0 {
		t.Errorf("%d of %d writes and %d of %d handshakes failed while the certificates were renewed: %s",
			failedWrites, writes, failedHandshakes, handshakes, load.firstError())
	}
	if writes == 0 || handshakes == 0 {
		t.Fatalf("the load did nothing: %d writes, %d handshakes", writes, handshakes)
	}
	for _, m := range c.Members {
		if pid := c.EtcdPID(m.Name); pid != pids[m.Name] {
			t.Errorf("etcd of %s restarted (pid %d → %d): a renewal needs none", m.Name, pids[m.Name], pid)
		}
		if !c.LogContains(m.Name, "certificate renewed", "peer") {
			t.Errorf("the agent of %s did not log renewing its peer certificate", m.Name)
		}
	}
	if v := c.WaitVoters(converge, c.AllNames()...); len(v) != 3 {
		t.Fatalf("voters %v", v)
	}

	t.Run("kube-apiserver's client connects with its renewed certificate", func(t *testing.T) {
		if time.Now().Before(first[files[1]]) {
			t.Fatal("the first apiserver-etcd-client certificate has not expired: the check would prove nothing")
		}
		// What kube-apiserver does (k8s.io/apiserver storagebackend
		// factory/etcd3.go): transport.TLSInfo{...}.ClientConfig(), whose
		// GetClientCertificate reads the files at every handshake.
		info := transport.TLSInfo{CertFile: filepath.Join(pki.dir, "apiserver-etcd-client.crt"), KeyFile: filepath.Join(pki.dir, "apiserver-etcd-client.key"),
			TrustedCAFile: filepath.Join(pki.dir, "ca.crt")}
		cfg, err := info.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Member("node1").ClientURL()}, DialTimeout: 5 * time.Second, TLS: cfg, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "/apiserver/renewed", "ok"); err != nil {
			t.Fatalf("a client with the renewed apiserver-etcd-client certificate: %v", err)
		}
	})

	t.Run("certs status names each certificate and what renews it", func(t *testing.T) {
		out, err := exec.Command(testbed.Binary, "certs", "status", "--config", c.Spec).CombinedOutput()
		if err != nil {
			t.Fatalf("certs status: %v\n%s", err, out)
		}
		t.Logf("certs status:\n%s", out)
		for _, want := range []string{"node2", "peer", "apiserver-etcd-client", "the agent, with tls.ca", "CN=node3-peer", "nothing: a CA is not renewed"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("certs status lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("no key on the host: nothing renews, status says so and exits 2 near expiry", func(t *testing.T) {
		if err := os.Rename(filepath.Join(pki.dir, "ca.key"), filepath.Join(pki.dir, "ca.key.away")); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(testbed.Binary, "certs", "status", "--config", c.Spec).CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), "not on this host") {
			t.Fatalf("certs status without the CA key: exit %d\n%s", code, out)
		}
		// By hand, with the key brought for it.
		out, err = exec.Command(testbed.Binary, "certs", "renew", "--config", c.Spec, "--name", "node1", "--force",
			"--ca-key", filepath.Join(pki.dir, "ca.key.away")).CombinedOutput()
		if err != nil || strings.Count(string(out), "renewed, expires") != 4 {
			t.Fatalf("certs renew --ca-key --force: %v\n%s", err, out)
		}
	})
}

func exitCodeOf(err error) int {
	if e, ok := errors.AsType[*exec.ExitError](err); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// tlsLoad is a writer on one long-lived client, and a prober that opens a
// new TLS connection to a member's client and peer ports every 50 ms and
// checks the certificate it is shown against the CA, as a new client or
// peer would.
type tlsLoad struct {
	stopOnce                                     sync.Once
	done                                         chan struct{}
	wg                                           sync.WaitGroup
	writes, failedWrites, handshakes, failedDial atomic.Int64
	mu                                           sync.Mutex
	first                                        string
}

func startTLSLoad(t *testing.T, c *testbed.Cluster, pki *clusterPKI) *tlsLoad {
	l := &tlsLoad{done: make(chan struct{})}
	cli := c.Client()
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("/renew/%d", i%100), "v")
			cancel()
			l.writes.Add(1)
			if err != nil {
				l.failedWrites.Add(1)
				l.note(fmt.Sprintf("write: %v", err))
			}
		}
	}()
	go func() {
		defer l.wg.Done()
		cfg := pki.clientTLS(t, true)
		var eps []string
		for _, m := range c.Members {
			eps = append(eps, strings.TrimPrefix(m.ClientURL(), "https://"), strings.TrimPrefix(m.PeerURL(), "https://"))
		}
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ep := eps[i%len(eps)]
			l.handshakes.Add(1)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", ep, cfg)
			if err != nil {
				l.failedDial.Add(1)
				l.note(fmt.Sprintf("handshake with %s: %v", ep, err))
				continue
			}
			_ = conn.Close()
		}
	}()
	return l
}

func (l *tlsLoad) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first == "" {
		l.first = s
	}
}

func (l *tlsLoad) firstError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *tlsLoad) stop() (writes, failedWrites, handshakes, failedHandshakes int64) {
	l.stopOnce.Do(func() { close(l.done) })
	l.wg.Wait()
	return l.writes.Load(), l.failedWrites.Load(), l.handshakes.Load(), l.failedDial.Load()
}
