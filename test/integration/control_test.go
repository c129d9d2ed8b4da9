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
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// controlSocket is where an agent takes its control requests.
func controlSocket(c *testbed.Cluster, name string) string {
	return filepath.Join(c.StateDir(name), "agent.sock")
}

// curlAs POSTs body to url (through the unix socket sock when it is not
// empty) as uid (0: root, else setpriv to that uid with no groups) and
// returns the HTTP status (0 when none came back) and what curl said.
func curlAs(t *testing.T, uid int, sock, url, body string) (int, string) {
	t.Helper()
	args := []string{"-sS", "-m", "20", "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json", "-d", body}
	if sock != "" {
		args = append(args, "--unix-socket", sock)
	}
	args = append(args, url)
	bin := "curl"
	if uid != 0 {
		id := fmt.Sprint(uid)
		args = append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "curl"}, args...)
		bin = "setpriv"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	out := strings.TrimSpace(stdout.String())
	body, status := "", out
	if i := strings.LastIndex(out, "\n"); i >= 0 {
		body, status = out[:i], out[i+1:]
	}
	code := 0
	_, _ = fmt.Sscanf(status, "%d", &code)
	said := strings.TrimSpace(body + " " + stderr.String())
	t.Logf("POST %s as uid %d (socket %q): HTTP %d: %s", url, uid, sock, code, said)
	return code, said
}

// TestControlOnlyFromTheAgentsUser: with quorum lost (the moment a fence
// or a forced start is taken), a local user who is neither root nor the
// agent's user cannot fence the member: agent.addr serves no POST (403,
// pointing to the socket), the control socket's dir keeps that user out,
// and, were the dir opened up by mistake, the socket's peer check refuses
// the user's uid (403). Nothing is journaled. root, through the socket, is
// taken, and the fence carried out: the member had no leader long enough.
func TestControlOnlyFromTheAgentsUser(t *testing.T) {
	t.Parallel()
	c, _ := runningCluster(t, 3, repairSpec)
	for _, name := range []string{"node2", "node3"} {
		if err := c.Stop(name); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitPasses(converge, 2, "node1")
	m := c.Member("node1")
	fence := `{"id":"evil1","role":"fenced","source":"node2"}`
	journal := filepath.Join(c.StateDir("node1"), "recovery.json")
	noJournal := func(after string) {
		t.Helper()
		if b, err := os.ReadFile(journal); err == nil {
			t.Fatalf("after %s, node1 journaled a recovery:\n%s", after, b)
		}
	}

	code, out := curlAs(t, 65534, "", fmt.Sprintf("http://%s:%d/recovery", m.IP, m.AgentPort), fence)
	if code != 403 || !strings.Contains(out, "agent.sock") {
		t.Errorf("uid 65534, POST to agent.addr: HTTP %d, want 403 and a pointer to the control socket", code)
	}
	noJournal("a POST to agent.addr")

	sock := controlSocket(c, "node1")
	if code, _ := curlAs(t, 65534, sock, "http://agent/recovery", fence); code != 0 {
		t.Errorf("uid 65534 through the socket: HTTP %d, want no connection (the socket's dir is the agent's own)", code)
	}
	noJournal("uid 65534 through the socket")

	// The dir opened up by mistake: the kernel's word on the caller
	// (SO_PEERCRED) still refuses it.
	for _, d := range []string{filepath.Dir(c.Dir), c.Dir, filepath.Join(c.Dir, "node1"), c.StateDir("node1")} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatalf("the control socket: %v", err)
	}
	if code, out := curlAs(t, 65534, sock, "http://agent/recovery", fence); code != 403 || !strings.Contains(out, "uid 65534") {
		t.Errorf("uid 65534 through an opened socket: HTTP %d, want 403 naming the uid", code)
	}
	noJournal("uid 65534 through an opened socket")
	if err := os.Chmod(c.StateDir("node1"), 0o700); err != nil {
		t.Fatal(err)
	}

	if code, _ := curlAs(t, 0, sock, "http://agent/recovery", fence); code != 202 {
		t.Fatalf("root through the socket: HTTP %d, want 202", code)
	}
	b, err := os.ReadFile(journal)
	var j struct{ ID, Step string }
	if err != nil || json.Unmarshal(b, &j) != nil || j.ID != "evil1" || j.Step != "fenced" {
		t.Fatalf("root's fence: journal %s (%v), want recovery evil1 fenced", b, err)
	}
	// Its cluster has no quorum: the fence is carried out, once the
	// member has had no leader for the required time.
	pid := c.EtcdPID("node1")
	// The agent logs its decision once the stop returned: the etcd can be
	// seen gone a moment before the line is there.
	testbed.Eventually(t, converge, "node1's fenced etcd to stop, its agent saying that its member had no leader long enough", func() string {
		if testbed.Alive(pid) {
			return fmt.Sprintf("etcd %d runs", pid)
		}
		if !c.LogContains("node1", "has had no leader for", "stopping it for good") {
			return "etcd stopped, the reason not logged"
		}
		return ""
	})
}

// TestFenceOnAHealthyClusterEndsByItself: a fence journaled on a member
// of a healthy cluster (as one taken at a leaderless instant would be) is
// not acted on: the member, asked at each pass, has a leader, so its etcd
// keeps running, and the agent calls the fence off by itself.
func TestFenceOnAHealthyClusterEndsByItself(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	pid := c.EtcdPID("node2")
	j := fmt.Sprintf(`{"id":"evil1","role":"fenced","source":"node1","step":"fenced","startedAt":%q,"oldMemberID":%d}`,
		time.Now().UTC().Format(time.RFC3339), ids["node2"])
	if err := os.WriteFile(filepath.Join(c.StateDir("node2"), "recovery.json"), []byte(j), 0o600); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, converge, "node2's agent to call the fence off", func() string {
		b, err := os.ReadFile(filepath.Join(c.StateDir("node2"), "recovery.json"))
		if err != nil {
			return err.Error()
		}
		var got struct{ Step, Error string }
		if err := json.Unmarshal(b, &got); err != nil {
			return err.Error()
		}
		if got.Step != "aborted" {
			return "step " + got.Step
		}
		return ""
	})
	if now := c.EtcdPID("node2"); now != pid || !testbed.Alive(pid) {
		t.Errorf("node2's etcd is pid %d, was %d: the fence stopped a member that had a leader", now, pid)
	}
	if after := c.WaitVoters(converge, c.AllNames()...); after["node2"] != ids["node2"] {
		t.Errorf("node2 is member %x, was %x", after["node2"], ids["node2"])
	}
	logged(t, c, "node2's agent says why it called the fence off", []string{"node2"}, "has a leader", "fence")
}
