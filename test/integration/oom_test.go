package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// memCgroupV1 is this process's cgroup v1 memory cgroup dir ("": none).
func memCgroupV1() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "memory" {
			dir := filepath.Join("/sys/fs/cgroup/memory", f[2])
			if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err == nil {
				return dir
			}
		}
	}
	return ""
}

// TestOOMKillsNamed: node2's etcd, moved into a memory cgroup capped a
// few MB above what it uses, is killed by the kernel's OOM killer five
// times in a row; each time its agent says so (not "killed by signal"),
// restarts it with the usual backoff as the same member, and repairs
// nothing. A kill -9 by hand is not called an OOM kill.
func TestOOMKillsNamed(t *testing.T) {
	base := memCgroupV1()
	if base == "" || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v1 memory controller")
	}
	c := testbed.New(t, 3)
	c.WriteSpec()
	for _, n := range c.AllNames() {
		c.Start(n)
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client("node2")
	value := strings.Repeat("x", 1<<20)
	for i := 1; i <= 5; i++ {
		pid := c.EtcdPID("node2")
		if pid == 0 {
			t.Fatalf("round %d: node2 has no etcd", i)
		}
		dir := filepath.Join(base, fmt.Sprintf("etcdkeeper-oom-%d-%d", os.Getpid(), i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("moving etcd %d into %s: %v", pid, dir, err)
		}
		usage, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			t.Fatal(err)
		}
		u, _ := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(u+(16<<20), 10)), 0o644); err != nil {
			t.Fatalf("capping %s: %v", dir, err)
		}
		// The agent looks at etcd's cgroup each pass: let one see the move.
		c.KickPasses(converge, 2, "node2")
		deadline := time.Now().Add(2 * time.Minute)
		for n := 0; testbed.Alive(pid); n++ {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: node2's etcd survived %d MB of writes under a cap of %d MB", i, n, (u>>20)+16)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = cli.Put(ctx, fmt.Sprintf("oom/%d/%d", i, n%64), value)
			cancel()
		}
		testbed.Eventually(t, converge, fmt.Sprintf("round %d: node2's agent names the OOM kill", i), func() string {
			if n := logCount(c, "node2", `"msg":"etcd exited"`, "killed by the kernel's OOM killer"); n < i {
				return fmt.Sprintf("%d OOM exits logged, want %d", n, i)
			}
			return ""
		})
		got := c.WaitVoters(converge, c.AllNames()...)
		if got["node2"] != ids["node2"] {
			t.Fatalf("round %d: node2 is member %x, was %x: an OOM kill must not repair", i, got["node2"], ids["node2"])
		}
	}
	if n := logCount(c, "node2", `"msg":"etcd exited"`, `"class":"resource"`); n < 5 {
		t.Errorf("%d exits of class resource, want 5", n)
	}
	if logCount(c, "node2", "rejoin") > 0 || logCount(c, "node2", "moving the data") > 0 {
		t.Errorf("node2's agent repaired after an OOM kill")
	}
	// A kill -9 by hand is no OOM kill.
	pid := c.EtcdPID("node2")
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, converge, "node2's agent notes the kill -9", func() string {
		if logCount(c, "node2", `"msg":"etcd exited"`, "killed by signal") == 0 {
			return "no exit by signal logged"
		}
		return ""
	})
	if n := logCount(c, "node2", `"msg":"etcd exited"`, "killed by the kernel's OOM killer"); n != 5 {
		t.Errorf("%d OOM exits after a kill -9, want still 5", n)
	}
	t.Logf("5 OOM kills in a row named, node2 kept member %x; kill -9 by hand reported as a signal", ids["node2"])
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
