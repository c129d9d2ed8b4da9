package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestFrozenEtcdIsKilledByItsAgent: node2's etcd is frozen (SIGSTOP: alive
// and silent) while node1 and node3 keep a quorum. A stopped process
// cannot act on SIGTERM and would never answer again: its agent kills it
// (SIGKILL) because of its state, long before the 90 s a silent etcd may
// otherwise take, says so as its own kill, and the member comes back as
// a healthy voter with its ID.
func TestFrozenEtcdIsKilledByItsAgent(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "frozen", 10)
	pid := c.EtcdPID("node2")
	if !testbed.Alive(pid) {
		t.Fatalf("etcd of node2 (pid %d) is not running", pid)
	}
	// A handle on this very process (a pidfd): the cleanup's SIGKILL must
	// not reach another process that got its pid after the agent killed
	// it (pid_max is 32768 here, and 8 tests start processes meanwhile).
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Should the agent never kill it, let the process go at the end.
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGKILL) })

	testbed.Eventually(t, 2*time.Minute, "a new etcd for node2", func() string {
		if p := c.EtcdPID("node2"); p == pid || !testbed.Alive(p) {
			return fmt.Sprintf("etcd pid still %d", p)
		}
		return ""
	})
	after := c.WaitVoters(2*time.Minute, c.AllNames()...)
	t.Logf("node2 was a healthy voter again %s after its etcd was frozen", time.Since(frozen).Round(100*time.Millisecond))
	if after["node2"] != ids["node2"] {
		t.Errorf("node2 member ID changed from %x to %x", ids["node2"], after["node2"])
	}

	stopAt, line, ok := logTime(t, c.LogPath("node2"), `"msg":"stopping etcd"`, `"reason":"stopped process`)
	if !ok {
		c.DumpLog("node2", 30)
		t.Fatalf("node2's agent did not log that it stopped its etcd as a stopped process")
	}
	t.Logf("node2's agent: %s", line)
	// The decision came from the process's state, not from the deadline
	// for a silent etcd.
	if took := stopAt.Sub(frozen); took >= reconcileReadyDeadline {
		t.Errorf("the agent stopped its frozen etcd %s after the freeze: not before the %s deadline of a silent etcd", took, reconcileReadyDeadline)
	}
	if !c.LogContains("node2", `"msg":"etcd exited"`, "killed by the agent") {
		t.Errorf("node2's agent did not log the exit as its own kill")
	}
	if c.LogContains("node2", "operator or OOM killer") {
		t.Errorf("node2's agent blamed its own kill on an operator or the OOM killer")
	}
	expectKeys(t, c, "node2", "frozen", 10)
}

// logTime is the time of the first agent log line with all parts, and
// the line.
func logTime(t *testing.T, path string, parts ...string) (time.Time, string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if !ok {
			continue
		}
		var l struct {
			TS string `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
		if err != nil {
			t.Fatalf("log time %q: %v", l.TS, err)
		}
		return ts, line, true
	}
	return time.Time{}, "", false
}
