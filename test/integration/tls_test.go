package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// clusterPKI is a test CA and the certificate files of a TLS cluster.
type clusterPKI struct {
	dir string
	ca  *testpki.CA
}

func newClusterPKI(t *testing.T) *clusterPKI {
	p := &clusterPKI{dir: filepath.Join(t.TempDir(), "pki"), ca: testpki.NewCA(t, "etcdkeeper test CA")}
	testpki.WriteFile(t, filepath.Join(p.dir, "ca.crt"), p.ca.CertPEM)
	p.ca.Issue(t, "etcdkeeper-agent").Write(t, p.dir, "agent")
	// With etcd auth on, a request without a token acts as the user its
	// certificate names: the test's own clients are root that way, the
	// agents only through their credentials file.
	p.ca.Issue(t, "root").Write(t, p.dir, "client")
	return p
}

// issue writes member m's server certificate (client port) and peer
// certificate. etcd checks a peer's client certificate against the address
// the connection comes from, and on loopback that is 127.0.0.1 whatever
// the member's own address: the peer certificate names it too.
func (p *clusterPKI) issue(t *testing.T, m testbed.Member) {
	ip := net.ParseIP(m.IP)
	p.ca.Issue(t, m.Name, ip).Write(t, p.dir, m.Name)
	p.ca.Issue(t, m.Name+"-peer", ip, net.ParseIP("127.0.0.1")).Write(t, p.dir, m.Name+"-peer")
}

// spec is the tls: section: TLS on both ports, client certificates
// required on both, per-member files through {name}.
func (p *clusterPKI) spec() string {
	return fmt.Sprintf(`tls:
  client:
    certFile: %[1]s/{name}.crt
    keyFile: %[1]s/{name}.key
    trustedCAFile: %[1]s/ca.crt
    clientCertAuth: true
  peer:
    certFile: %[1]s/{name}-peer.crt
    keyFile: %[1]s/{name}-peer.key
    trustedCAFile: %[1]s/ca.crt
    clientCertAuth: true
  agent:
    certFile: %[1]s/agent.crt
    keyFile: %[1]s/agent.key
    trustedCAFile: %[1]s/ca.crt
`, p.dir)
}

// clientTLS is the test clients' config, with or without their
// certificate.
func (p *clusterPKI) clientTLS(t *testing.T, withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: x509.NewCertPool()}
	cfg.RootCAs.AppendCertsFromPEM(p.ca.CertPEM)
	if withCert {
		pair, err := tls.LoadX509KeyPair(filepath.Join(p.dir, "client.crt"), filepath.Join(p.dir, "client.key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// startTLSCluster bootstraps three members with TLS on both ports; extra
// is appended to the spec.
func startTLSCluster(t *testing.T, extra string) (*testbed.Cluster, *clusterPKI, map[string]uint64) {
	c := testbed.New(t, 3)
	pki := newClusterPKI(t)
	for _, m := range c.Members {
		pki.issue(t, m)
	}
	c.UseTLS(pki.clientTLS(t, true))
	c.Extra = pki.spec() + extra
	c.WriteSpec()
	start := time.Now()
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	t.Logf("bootstrap over TLS: 3 healthy voters in %s", time.Since(start).Round(time.Millisecond))
	return c, pki, ids
}

// joinFourth adds node4 to the spec and starts it; it must join as a
// learner, be promoted, and leave the other members' IDs alone.
func joinFourth(t *testing.T, c *testbed.Cluster, pki *clusterPKI, ids map[string]uint64) map[string]uint64 {
	m := c.AddMember()
	// Every agent re-reads the spec and checks node4's files too.
	pki.issue(t, m)
	c.WriteSpec()
	start := time.Now()
	c.Start("node4")
	ids4 := c.WaitVoters(converge, c.AllNames()...)
	t.Logf("join over TLS: node4 a healthy voter in %s", time.Since(start).Round(time.Millisecond))
	for _, n := range []string{"node1", "node2", "node3"} {
		if ids4[n] != ids[n] {
			t.Fatalf("%s changed ID", n)
		}
	}
	logged(t, c, "node4's agent says it promoted node4 from learner", []string{"node4"}, "promoted to voter")
	return ids4
}

// repairNode2 corrupts node2's WAL while its agent is stopped; the agent
// must replace the member and keep the old data dir.
func repairNode2(t *testing.T, c *testbed.Cluster, ids map[string]uint64) {
	if err := c.Stop("node2"); err != nil {
		t.Fatal(err)
	}
	c.CorruptWAL("node2")
	start := time.Now()
	c.Start("node2")
	after := c.WaitVoters(converge, c.AllNames()...)
	t.Logf("repair over TLS: node2 a healthy voter again in %s", time.Since(start).Round(time.Millisecond))
	if after["node2"] == ids["node2"] {
		t.Fatalf("node2 kept member ID %x; a repaired member must rejoin as a new member", ids["node2"])
	}
	if backups := c.Backups("node2"); len(backups) != 1 {
		t.Errorf("backups of node2 = %v, want the corrupt member dir kept under %s/.etcdkeeper-backups", backups, c.DataDir("node2"))
	}
	if !c.LogContains("node2", "data is corrupt") {
		t.Errorf("node2's agent did not log the corruption it found")
	}
}

// TestTLS: a cluster with TLS and client certificates on the client and
// peer ports bootstraps, takes a 4th member that joins as a learner and is
// promoted, and repairs a member with a corrupt WAL; the agents talk to
// etcd with their own client certificate throughout.
func TestTLS(t *testing.T) {
	t.Parallel()
	c, pki, ids := startTLSCluster(t, "")
	testbed.Put(t, c.Client(), "/tls/a", "1")

	t.Run("etcd serves TLS with client certificates only", func(t *testing.T) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.EtcdPID("node1")))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		for _, want := range []string{
			"--cert-file=" + filepath.Join(pki.dir, "node1.crt"), "--key-file=" + filepath.Join(pki.dir, "node1.key"),
			"--trusted-ca-file=" + filepath.Join(pki.dir, "ca.crt"), "--client-cert-auth=true",
			"--peer-cert-file=" + filepath.Join(pki.dir, "node1-peer.crt"), "--peer-key-file=" + filepath.Join(pki.dir, "node1-peer.key"),
			"--peer-trusted-ca-file=" + filepath.Join(pki.dir, "ca.crt"), "--peer-client-cert-auth=true",
		} {
			if !slices.Contains(args, want) {
				t.Errorf("etcd of node1 runs without %s: %q", want, args)
			}
		}
		// Without a client certificate etcd refuses the connection.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Member("node1").ClientURL()},
			DialTimeout: 2 * time.Second, TLS: pki.clientTLS(t, false), Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := cli.Get(ctx, "/tls/a"); err == nil {
			t.Error("etcd answered a client without a certificate")
		}
	})

	t.Run("a 4th member joins as learner and is promoted", func(t *testing.T) {
		ids = joinFourth(t, c, pki, ids)
		testbed.Eventually(t, converge, "node4 has the data", func() string {
			if v, err := c.GetFrom("node4", "/tls/a"); err != nil || v != "1" {
				return fmt.Sprintf("%q %v", v, err)
			}
			return ""
		})
	})

	t.Run("etcdkeeper status talks TLS", func(t *testing.T) {
		out, err := exec.Command(testbed.Binary, "status", "--config", c.Spec).CombinedOutput()
		if err != nil {
			t.Fatalf("etcdkeeper status: %v\n%s", err, out)
		}
		if n := strings.Count(string(out), "healthy"); n < 4 {
			t.Errorf("status shows %d healthy members, want 4:\n%s", n, out)
		}
	})

	t.Run("a corrupt WAL is repaired over TLS", func(t *testing.T) {
		repairNode2(t, c, ids)
		testbed.Eventually(t, converge, "node2 has the data again", func() string {
			if v, err := c.GetFrom("node2", "/tls/a"); err != nil || v != "1" {
				return fmt.Sprintf("%q %v", v, err)
			}
			return ""
		})
	})
}

// startAuthCluster is the tests' one etcd auth set-up: a TLS cluster
// whose agents have a credentials file for root, then root made with
// password and auth enabled (the agents logged in while it was off).
func startAuthCluster(t *testing.T, password string) (*testbed.Cluster, *clusterPKI, map[string]uint64) {
	t.Helper()
	credentials := filepath.Join(t.TempDir(), "credentials")
	testpki.WriteFile(t, credentials, []byte("root:"+password+"\n"))
	c, pki, ids := startTLSCluster(t, "auth:\n  credentialsFile: "+credentials+"\n")
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return c, pki, ids
}

// TestTLSWithAuth: with etcd auth enabled, the agents log in with the
// credentials file (their certificate names no etcd user) and still join
// and repair members; the password appears in no log.
func TestTLSWithAuth(t *testing.T) {
	t.Parallel()
	const password = "pw-7f3c9e1d-never-logged"
	c, pki, ids := startAuthCluster(t, password)
	// The agents logged in while auth was off and hold no token; a spec
	// change makes them dial, and log in, again.
	c.Extra += "# auth enabled\n"
	c.WriteSpec()
	for _, name := range c.AllNames() {
		testbed.Eventually(t, converge, name+" applies the changed spec", func() string {
			if !c.LogContains(name, `"msg":"spec applied"`) {
				return "no spec applied yet"
			}
			return ""
		})
	}
	testbed.Put(t, c.Client(), "/auth/a", "1")

	ids = joinFourth(t, c, pki, ids)
	repairNode2(t, c, ids)
	testbed.Eventually(t, converge, "node2 has the data again", func() string {
		if v, err := c.GetFrom("node2", "/auth/a"); err != nil || v != "1" {
			return fmt.Sprintf("%q %v", v, err)
		}
		return ""
	})
	for _, name := range c.AllNames() {
		if c.LogContains(name, password) {
			t.Errorf("the log of %s shows the password", name)
		}
	}
}
