package etcdproc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestOOMCounter: the file that counts a process's OOM kills, from
// /proc/PID/cgroup: cgroup v1's memory controller, v2's unified
// hierarchy, neither; and its oom_kill line read, a rise seen as a kill.
func TestOOMCounter(t *testing.T) {
	root := t.TempDir()
	old := cgroupRoot
	cgroupRoot = root
	defer func() { cgroupRoot = old }()
	v2 := filepath.Join(root, "system.slice/etcdkeeper.service")
	if err := os.MkdirAll(v2, 0o755); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(v2, "memory.events")
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cgroup, want string
	}{
		{"v1 memory controller", "12:pids:/\n4:memory:/system.slice/etcdkeeper.service\n0::/system.slice/etcdkeeper.service\n",
			filepath.Join(root, "memory/system.slice/etcdkeeper.service/memory.oom_control")},
		{"v1, controllers joined", "3:cpu,memory:/a\n", filepath.Join(root, "memory/a/memory.oom_control")},
		{"v2 unified", "0::/system.slice/etcdkeeper.service\n", events},
		{"v2 without memory.events (no memory controller)", "0::/other\n", ""},
		{"nothing", "", ""},
	}
	for _, tt := range tests {
		if got := oomCounter(tt.cgroup); got != tt.want {
			t.Errorf("%s: oomCounter = %q, want %q", tt.name, got, tt.want)
		}
	}
	n, err := oomKills(events)
	if err != nil || n != 2 {
		t.Fatalf("oomKills = %d, %v; want 2", n, err)
	}
	w := memWatch{file: events, kills: n, ok: true}
	if w.killed() {
		t.Error("no rise seen as a kill")
	}
	if err := os.WriteFile(events, []byte("oom 4\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !w.killed() {
		t.Error("oom_kill 2 → 3 not seen as a kill")
	}
	if (memWatch{}).killed() {
		t.Error("a watch that never found its cgroup saw a kill")
	}
	v1 := filepath.Join(root, "v1.oom_control")
	if err := os.WriteFile(v1, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := oomKills(v1); err != nil || n != 7 {
		t.Errorf("oomKills(v1) = %d, %v; want 7", n, err)
	}
}

// TestMemWatchKeepsItsCount: a look at the same cgroup after an OOM kill
// (a pass between the kill and the reaping) keeps the count from before,
// so the exit is still named an OOM kill; a move to another cgroup
// counts from the move.
func TestMemWatchKeepsItsCount(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(f string, n int) {
		if err := os.WriteFile(f, []byte(fmt.Sprintf("oom 0\noom_kill %d\n", n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 3)
	var w memWatch
	w.lookAt(a)
	write(a, 4) // the OOM killer
	w.lookAt(a) // a pass before the exit is reaped
	if !w.killed() {
		t.Error("a look after the kill counted it as the cgroup's past")
	}
	write(b, 7)
	w.lookAt(b) // moved to another cgroup
	if w.killed() {
		t.Error("a move to another cgroup counts its past kills")
	}
}
