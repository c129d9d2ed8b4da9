package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestSecondHostWithSameName: an agent started on another host with an
// existing member's name and an empty disk (a cloned machine, new
// hardware while the old host still runs) must not remove the live
// member: it waits and says why, and node2 keeps its ID, data and health.
func TestSecondHostWithSameName(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, "")
	putKeys(t, c, "claim", 10)

	// The other host: the same spec, its own data and state dirs (and its
	// own agent port: the two agents share this machine's loopback).
	other := filepath.Join(c.Dir, "other-host")
	spec, err := os.ReadFile(c.Spec)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Member("node2")
	text := strings.ReplaceAll(string(spec), c.Dir+"/{name}", other+"/{name}")
	text = strings.Replace(text, fmt.Sprintf("%s:%d", m.IP, m.AgentPort), fmt.Sprintf("%s:%d", m.IP, testbed.FreePort(t, m.IP)), 1)
	otherSpec := filepath.Join(other, "cluster.yaml")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherSpec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(c.Dir, "other-node2.log")
	p, err := testbed.StartProcess(log, nil, testbed.Binary, "run", "--config", otherSpec, "--name", "node2", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()

	testbed.Eventually(t, converge, "the second node2 agent to refuse to take over", func() string {
		b, _ := os.ReadFile(log)
		if !strings.Contains(string(b), "another host claims this name") {
			return "no such decision in " + log
		}
		return ""
	})
	got := c.WaitVoters(converge, c.AllNames()...)
	if got["node2"] != ids["node2"] {
		t.Fatalf("node2 is member %x now, was %x: the live member was replaced", got["node2"], ids["node2"])
	}
	if b, _ := os.ReadFile(log); strings.Contains(string(b), `"msg":"rejoin step"`) || strings.Contains(string(b), `"msg":"cluster lock taken"`) {
		t.Errorf("the second agent started a rejoin:\n%s", b)
	}
	expectKeys(t, c, "node2", "claim", 10)
}
