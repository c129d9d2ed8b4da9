package integration

import (
	"crypto/x509"
	"syscall"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestAgentSaysWhyTLSIsRefused: the agents' certificate is replaced by
// one without the clientAuth usage (a renewal done wrong; the agents read
// it at every handshake), then node2's etcd is killed. Its agent starts
// it again and cannot talk to it: etcd refuses the certificate. The
// agent must say so, with TLS's reason, not only that etcd does not
// answer yet; and once the certificate is fixed, node2 is a healthy
// voter again with its ID.
func TestAgentSaysWhyTLSIsRefused(t *testing.T) {
	t.Parallel()
	c, pki, ids := startTLSCluster(t, "")
	good := pki.ca.Issue(t, "etcdkeeper-agent")
	pki.ca.IssueUsages(t, "etcdkeeper-agent", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}).Write(t, pki.dir, "agent")
	pid := c.EtcdPID("node2")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, converge, "node2's agent to say etcd refuses its certificate", func() string {
		if !c.LogContains("node2", `"msg":"decision"`, "the TLS handshake fails: etcd refused the agent's certificate (tls.agent): remote error: tls: bad certificate") {
			return "no such decision logged yet"
		}
		return ""
	})
	if p := c.EtcdPID("node2"); p == pid || !testbed.Alive(p) {
		t.Fatalf("node2's etcd was not started again (pid %d)", p)
	}

	good.Write(t, pki.dir, "agent")
	after := c.WaitVoters(converge, c.AllNames()...)
	if after["node2"] != ids["node2"] {
		t.Errorf("node2 member ID changed from %x to %x", ids["node2"], after["node2"])
	}
}
