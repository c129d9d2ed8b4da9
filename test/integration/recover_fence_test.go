package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// hostView writes text (a spec) as host name sees it: only its own
// agent's state dir (with the control socket) is there, as on a real
// host, so recover reaches the other agents over the network only.
func hostView(t *testing.T, c *testbed.Cluster, name, text string) string {
	t.Helper()
	host := filepath.Join(c.Dir, "host-"+name)
	if err := os.MkdirAll(filepath.Join(host, name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c.StateDir(name), filepath.Join(host, name, "state")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	text = strings.Replace(text, "stateDir: "+c.Dir+"/{name}/state", "stateDir: "+host+"/{name}/state", 1)
	p := filepath.Join(c.Dir, "view-"+name+".yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// recoveryStep reads the step of member name's recovery journal.
func recoveryStep(t *testing.T, c *testbed.Cluster, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.StateDir(name), "recovery.json"))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), `"step": "`); ok {
			return strings.TrimSuffix(s, `",`)
		}
	}
	return string(b)
}

// TestRecoverSourceRefusesAfterFence: the source takes the request, then
// refuses it once its etcd is stopped (its full data check finds the WAL
// corrupt, which recover's live look could not see). recover follows the
// source's journal and calls the fence off: the fenced host's member is
// not left stopped for good. Issue 20 / F7: on 8011516 recover returned
// after the POST and node2 stayed fenced.
func TestRecoverSourceRefusesAfterFence(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 30)
	loseQuorum(t, c)
	// Damaged under the running etcd, which reads its WAL only at start.
	c.CorruptWAL("node1")

	// Each agent reports the voters its etcd (node1, running) or its data
	// (node2, stopped: the db's members bucket) knows.
	out, err := recoverCLI(t, c, "-o", "json")
	if err != nil {
		t.Fatalf("recover -o json: %v", err)
	}
	var plan struct {
		Members []struct {
			Name       string
			VotersFrom string
			Voters     []struct{ ID, Name string }
		}
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &plan); err != nil {
		t.Fatalf("recover -o json: %v", err)
	}
	for _, m := range plan.Members {
		want := map[string]string{"node1": "etcd", "node2": "db", "node3": ""}[m.Name]
		if m.VotersFrom != want || (want != "" && len(m.Voters) != 3) {
			t.Errorf("%s reports %d voters from %q, want 3 from %q", m.Name, len(m.Voters), m.VotersFrom, want)
		}
	}

	out, err = recoverCLI(t, c, "--from", "node1", "--yes", "--wait", "0")
	if err == nil {
		t.Errorf("recover succeeded, though its source refused")
	}
	if !strings.Contains(out, "node2: fenced") {
		t.Fatalf("node2 was not fenced: the test did not get to the point")
	}
	if !strings.Contains(out, "the source refused the recovery") || !strings.Contains(out, "node2: fence called off") {
		t.Errorf("recover does not say that the source refused and that node2's fence was called off")
	}
	testbed.Eventually(t, converge, "node1's journal to say refused", func() string {
		if s := recoveryStep(t, c, "node1"); s != "refused" {
			return "node1: " + s
		}
		return ""
	})
	if s := recoveryStep(t, c, "node2"); s != "aborted" {
		t.Errorf("node2's fence is at step %q after its source refused, want aborted", s)
	}
}

// TestRecoverSpecBehindCluster: the cluster has five voters, the spec
// recover reads lists three (the extras not removed yet). node3, node4
// and node5 are out of reach (stopped), so node1 and node2 have no
// quorum; with node2 fenced, the old check counted 1 unfenced member of
// the spec, fewer than its quorum of 2, and went ahead while three of
// five could still serve. node1's etcd reports its five voters: 2 of 5
// is no majority, refused. Issue 20 / F1.
func TestRecoverSpecBehindCluster(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 5, repairSpec)
	for _, name := range []string{"node3", "node4", "node5"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	view := filepath.Join(c.Dir, "behind.yaml")
	if err := os.WriteFile(view, []byte(c.SpecText("node1", "node2", "node3")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLeaderless(t, c, "node1", "node2")
	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	out, err := exec.CommandContext(ctx, testbed.Binary, "recover", "--config", view, "--name", "node1", "--from", "node1", "--yes", "--wait", "0").CombinedOutput()
	t.Logf("etcdkeeper recover --from node1 --yes (spec of 3):\n%s", out)
	if err == nil || !strings.Contains(string(out), "not a majority") || !strings.Contains(string(out), "only 2 of the 5 voters") {
		t.Errorf("recover from 2 of 5 voters with a spec of 3: err %v, want refused for the 5 voters node1's etcd knows", err)
	}
	for _, n := range []string{"node1", "node2"} {
		if _, err := os.Stat(filepath.Join(c.StateDir(n), "recovery.json")); err == nil {
			t.Errorf("%s has a recovery journal after a refused recovery", n)
		}
	}
}

// TestRecoverAbortSourceUnreachable: on a host that cannot reach the
// source, recover --abort refuses to call its fence off (the source may
// have started: the old member would run next to it), until told
// --force. Issue 20 / F8: on 8011516 the abort went ahead.
func TestRecoverAbortSourceUnreachable(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, repairSpec)
	loseQuorum(t, c)
	// node2's view of the spec: no other agent can be reached.
	text := c.SpecText()
	for _, m := range c.Members {
		if m.Name != "node2" {
			text = strings.Replace(text, fmt.Sprintf("agentAddr: %s:%d", m.IP, m.AgentPort), fmt.Sprintf("agentAddr: %s:1", m.IP), 1)
		}
	}
	view := hostView(t, c, "node2", text)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), converge)
		defer cancel()
		out, err := exec.CommandContext(ctx, testbed.Binary, append([]string{"recover", "--config", view, "--name", "node2"}, args...)...).CombinedOutput()
		t.Logf("on node2: etcdkeeper recover %s:\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	if out, err := run("--from", "node1", "--yes", "--id", "r1", "--wait", "0"); err != nil || !strings.Contains(out, "node2: fenced") {
		t.Fatalf("fencing node2 for a recovery from node1: %v", err)
	}
	out, err := run("--abort", "r1")
	if err == nil || !strings.Contains(out, "cannot be reached") {
		t.Errorf("--abort with the source out of reach: err %v, want a refusal", err)
	}
	if s := recoveryStep(t, c, "node2"); s != "fenced" {
		t.Fatalf("node2's fence is at %q after a refused --abort, want fenced", s)
	}
	if out, err := run("--abort", "r1", "--force"); err != nil || !strings.Contains(out, "node2: fence called off") {
		t.Errorf("--abort --force: err %v, want the fence called off", err)
	}
	if s := recoveryStep(t, c, "node2"); s != "aborted" {
		t.Errorf("node2's fence is at %q after --abort --force, want aborted", s)
	}
}
