package etcdproc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The kernel's OOM killer ends a process with SIGKILL, as an operator's
// kill -9 does; the memory cgroup it ran in counts it (cgroup v2
// memory.events, v1 memory.oom_control: oom_kill, "the number of
// processes belonging to this cgroup killed by any kind of OOM killer").
// The agent follows etcd's memory cgroup while it runs (Process.NoteCgroup:
// an operator or a container runtime may move it) and, when etcd dies by
// SIGKILL the agent did not send, reads the count again: one more is an
// OOM kill.

// cgroupRoot is where the cgroup filesystems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// oomCounter is the file that counts the OOM kills of pid's memory
// cgroup ("": none found). procCgroup is /proc/PID/cgroup's text.
func oomCounter(procCgroup string) string {
	var unified string
	for _, line := range strings.Split(procCgroup, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			unified = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "memory" {
				return filepath.Join(cgroupRoot, "memory", path, "memory.oom_control")
			}
		}
	}
	if unified != "" {
		f := filepath.Join(cgroupRoot, unified, "memory.events")
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

// oomKills reads the oom_kill count of a memory.events or
// memory.oom_control file.
func oomKills(file string) (uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "oom_kill" {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no oom_kill line (kernel older than 4.13?)", file)
}

// memWatch is what a Process knows of its memory cgroup: the counter
// file and its count when last looked at.
type memWatch struct {
	file  string
	kills uint64
	ok    bool
}

// look reads pid's memory cgroup again; a move to another cgroup starts
// counting there.
func (w *memWatch) look(pid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return
	}
	w.lookAt(oomCounter(string(b)))
}

// lookAt watches the counter file from now on. The same file as before
// keeps its count: a look between an OOM kill and the reaping of the
// process (a pass that runs meanwhile) must not count the kill as the
// cgroup's past.
func (w *memWatch) lookAt(file string) {
	if file == "" || (w.ok && file == w.file) {
		return
	}
	n, err := oomKills(file)
	if err != nil {
		return
	}
	*w = memWatch{file: file, kills: n, ok: true}
}

// killed: the cgroup counts an OOM kill since the last look.
func (w memWatch) killed() bool {
	if !w.ok {
		return false
	}
	n, err := oomKills(w.file)
	return err == nil && n > w.kills
}
