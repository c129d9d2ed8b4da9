package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestPackageUpgradeAllHostsAtOnce installs a new etcdkeeper on all three
// hosts in the same instant, as a fleet-wide `apt-get upgrade` does: each
// host's agent runs from its own copy, and the copy is replaced by rename
// (dpkg's way) on all three within microseconds. The new binary embeds
// the same etcd: the agents roll onto it one at a time, each etcd running
// on through its agent's exec (the new process adopts it). A steady
// writer through all members sees no failed write, never fewer than 2 of
// 3 healthy voters, and all three end on the new version with their old
// member IDs and their old agent PIDs (the agent execs the new binary);
// node1's and node3's etcd keep their PIDs. One agent (node2, a
// follower) is killed (-9) right before its exec, which ends its etcd
// with it (the lifeline); restarted as systemd would, the new binary
// finds nothing to adopt, starts etcd and finishes its step from the
// journal. Then a binary whose embedded etcd is two minors ahead is
// installed on one host: its agent refuses to restart onto it, and its
// member keeps running.
func TestPackageUpgradeAllHostsAtOnce(t *testing.T) {
	c := testbed.New(t, 3)
	newBin := buildVersion(t, filepath.Join(c.Dir, "etcdkeeper-new"), "-X main.version=0.0.2-upgrade")
	installed := map[string]string{}
	for _, name := range c.AllNames() {
		installed[name] = filepath.Join(c.Dir, name, "bin", "etcdkeeper")
		copyFile(t, testbed.Binary, installed[name])
	}
	// node2 crashes right before its exec, whenever its turn comes.
	for _, name := range c.AllNames() {
		if name == "node2" {
			c.StartBinary(name, installed[name], "ETCDKEEPER_TEST_CRASH_AT=upgrade-exec")
			continue
		}
		c.StartBinary(name, installed[name])
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	c.WaitPasses(converge, 2, c.AllNames()...)
	pids := map[string]int{}
	oldVersion := binaryVersion(t, testbed.Binary) // "dev", or what make's ldflags set
	for _, name := range c.AllNames() {
		pids[name] = c.AgentPID(name)
		if st := agentStatus(t, c, name); st.Version != oldVersion {
			t.Fatalf("%s runs version %q before the upgrade, want %s", name, st.Version, oldVersion)
		}
	}

	// node2 crashes on its way: not as the leader, whose etcd would go
	// with it.
	moveLeader(t, c.Client(), ids["node1"])
	etcdPIDs := map[string]int{}
	for _, name := range c.AllNames() {
		etcdPIDs[name] = c.EtcdPID(name)
	}
	w := c.StartWriter("upgrade", 10*time.Second, c.AllNames()...)
	mon := watchVoters(c)
	// Staged next to each target, then renamed over all three at once.
	for _, name := range c.AllNames() {
		copyFile(t, newBin, installed[name]+".dpkg-new")
	}
	began := time.Now()
	for _, name := range c.AllNames() {
		if err := os.Rename(installed[name]+".dpkg-new", installed[name]); err != nil {
			t.Fatal(err)
		}
	}

	if err := c.WaitExit("node2", 3*converge); err == nil {
		t.Fatal("node2's agent exited cleanly at its crash point")
	}
	// systemd (Restart=on-failure) starts what is at the path now.
	c.StartBinary("node2", installed["node2"])
	pids["node2"] = c.AgentPID("node2")

	testbed.Eventually(t, 3*converge, "all three agents on 0.0.2-upgrade with their old members", func() string {
		for _, name := range c.AllNames() {
			st, err := fetchStatus(c, name)
			if err != nil {
				return err.Error()
			}
			if st.Version != "0.0.2-upgrade" || st.Installed != nil {
				return fmt.Sprintf("%s runs %s (installed %v): %s", name, st.Version, st.Installed, st.Decision)
			}
			if st.MemberID != fmt.Sprintf("%x", ids[name]) || !st.Healthy {
				return fmt.Sprintf("%s: member %s healthy=%v, want %x healthy", name, st.MemberID, st.Healthy, ids[name])
			}
			if j := readJournal(t, c, name); j["done"] == nil {
				return name + "'s upgrade journal is still open"
			}
		}
		return ""
	})
	took := time.Since(began)
	w.Stop()
	fewest, leaders, retried := mon.stop()
	t.Logf("install to all on the new version: %s; longest write stall %s; %d writes ok, %d failed; leader changes %d; fewest healthy voters %d (%d observations unanswered, made again)",
		took.Round(100*time.Millisecond), time.Duration(w.MaxStall.Load()).Round(time.Millisecond), w.OK.Load(), w.Failed.Load(), leaders, fewest, retried)
	if n := w.Failed.Load(); n > 0 {
		t.Errorf("%d writes failed during the rollout (last: %v)", n, w.LastErr.Load())
	}
	if fewest < 2 {
		t.Errorf("the cluster had %d healthy voters at one point, want never fewer than 2 of 3", fewest)
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	for name, id := range ids {
		if after[name] != id {
			t.Errorf("%s is member %x after the upgrade, was %x", name, after[name], id)
		}
	}
	for name, pid := range pids {
		if c.AgentPID(name) != pid || !testbed.Alive(pid) {
			t.Errorf("%s's agent is not the same process (pid %d) after the exec onto the new binary", name, pid)
		}
	}
	if !c.LogContains("node2", "restarted onto the new binary: finishing the step") {
		t.Error("node2's new process did not finish the step journaled before the crash")
	}
	for _, name := range []string{"node1", "node3"} {
		if pid := c.EtcdPID(name); pid != etcdPIDs[name] || !testbed.Alive(pid) {
			t.Errorf("%s's etcd is pid %d after the upgrade, was %d: an agent upgrade with the same embedded etcd must not restart it", name, pid, etcdPIDs[name])
		}
		if !c.LogContains(name, "adopted the running etcd from the old binary") {
			t.Errorf("%s's new binary did not adopt its etcd", name)
		}
	}
	if c.EtcdPID("node2") == etcdPIDs["node2"] || testbed.Alive(etcdPIDs["node2"]) {
		t.Errorf("node2's etcd (pid %d) outlived its agent's kill -9", etcdPIDs["node2"])
	}

	// An embedded etcd two minors ahead of the cluster (3.7): refused.
	ahead := buildVersion(t, filepath.Join(c.Dir, "etcdkeeper-ahead"), "-X main.version=0.0.3-ahead -X go.etcd.io/etcd/api/v3/version.Version=3.9.0")
	etcdPID := c.EtcdPID("node1")
	copyFile(t, ahead, installed["node1"]+".dpkg-new")
	if err := os.Rename(installed["node1"]+".dpkg-new", installed["node1"]); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, converge, "node1 to refuse etcd 3.9.0", func() string {
		st, err := fetchStatus(c, "node1")
		if err != nil {
			return err.Error()
		}
		if st.Installed == nil || !strings.Contains(st.Decision, "not restarting onto the installed etcdkeeper 0.0.3-ahead (etcd 3.9.0): etcd 3.9.0 is more than one minor ahead of the cluster version 3.7") {
			return "node1: " + st.Decision
		}
		return ""
	})
	c.WaitPasses(converge, 3, "node1")
	if st := agentStatus(t, c, "node1"); st.Version != "0.0.2-upgrade" || c.EtcdPID("node1") != etcdPID || !testbed.Alive(etcdPID) {
		t.Errorf("node1 after the refusal: version %s, etcd pid %d (was %d): want the old binary and its etcd running on", st.Version, c.EtcdPID("node1"), etcdPID)
	}
	if m := metricsOf(t, c, "node1"); !strings.Contains(m, "etcdkeeper_upgrade_pending 1") || !strings.Contains(m, `etcdkeeper_build_info{etcd_version="3.7.3",version="0.0.2-upgrade"} 1`) {
		t.Errorf("node1's metrics do not show the pending, refused upgrade:\n%s", grepLines(m, "etcdkeeper_build_info", "etcdkeeper_upgrade_pending"))
	}
}

// buildVersion builds etcdkeeper with extra -ldflags (another version).
func buildVersion(t *testing.T, out, ldflags string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", out, "../../cmd/etcdkeeper")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", ldflags, err, b)
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

type upgradeStatus struct {
	Version   string `json:"version"`
	Installed *struct {
		Version string `json:"version"`
	} `json:"installed"`
	Decision string `json:"decision"`
	MemberID string `json:"memberID"`
	Healthy  bool   `json:"healthy"`
}

func fetchStatus(c *testbed.Cluster, name string) (upgradeStatus, error) {
	var st upgradeStatus
	b, err := agentGet(c, name, "/status")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s /status: %w", name, err)
	}
	return st, nil
}

func agentStatus(t *testing.T, c *testbed.Cluster, name string) upgradeStatus {
	t.Helper()
	st, err := fetchStatus(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func metricsOf(t *testing.T, c *testbed.Cluster, name string) string {
	t.Helper()
	b, err := agentGet(c, name, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func agentGet(c *testbed.Cluster, name, path string) ([]byte, error) {
	m := c.Member(name)
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s:%d%s", m.IP, m.AgentPort, path))
	if err != nil {
		return nil, fmt.Errorf("agent %s %s: %w", name, path, err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func readJournal(t *testing.T, c *testbed.Cluster, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.StateDir(name), "upgrade.json"))
	if err != nil {
		return map[string]any{}
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s's upgrade journal: %v", name, err)
	}
	return j
}

func grepLines(text string, parts ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range parts {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// voterWatch follows the cluster through the test's own observer: the
// fewest healthy voters seen and the leader changes.
type voterWatch struct {
	done    chan struct{}
	wg      sync.WaitGroup
	fewest  int
	changes int
	retried int // observations made again because one was not answered
}

func watchVoters(c *testbed.Cluster) *voterWatch {
	v := &voterWatch{done: make(chan struct{}), fewest: 3}
	cli := c.Client()
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		var leader uint64
		for {
			select {
			case <-v.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			o := testbed.Observe(cli)
			// A member list sent to a member that has just restarted
			// may wait out its second (etcd accepts connections before
			// it answers them): such an observation says nothing of the
			// voters, yet counted as none. Two more at once go to the
			// other members (round robin); only when none is answered
			// does it count as no healthy voter (a quorum lost).
			for tries := 1; o.Err != nil && tries < 3; tries++ {
				v.retried++
				o = testbed.Observe(cli)
			}
			healthy := 0
			for _, m := range o.Voters() {
				if m.HealthyVoter() {
					healthy++
				}
			}
			v.fewest = min(v.fewest, healthy)
			if l := o.Leader(); l != 0 && l != leader {
				if leader != 0 {
					v.changes++
				}
				leader = l
			}
		}
	}()
	return v
}

func (v *voterWatch) stop() (fewest, changes, retried int) {
	close(v.done)
	v.wg.Wait()
	return v.fewest, v.changes, v.retried
}

// binaryVersion is the etcdkeeper version bin says it is
// ("etcdkeeper <version>" on the first line of `bin version`).
func binaryVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	v, ok := strings.CutPrefix(first, "etcdkeeper ")
	if !ok || v == "" {
		t.Fatalf("%s version: %q", bin, out)
	}
	return v
}
