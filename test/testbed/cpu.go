package testbed

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// cpuRoot is the cgroup v1 cpu controller's hierarchy: the CPU quota of a
// slow host. (This machine mounts cgroup v1 controllers; cgroup v2 is
// mounted too, but without its cpu controller.)
const cpuRoot = "/sys/fs/cgroup/cpu"

// CPULimit is a cgroup v1 cpu group whose processes together get at most a
// set share of a core: a slow host. Its directory outlives a SIGKILLed
// program (cgroups are not namespaced here); NewCPULimit removes the empty
// ones such runs left behind.
type CPULimit struct{ dir string }

var (
	cpuOnce sync.Once
	cpuRun  string
)

// NewCPULimit makes a new, unlimited cpu cgroup for host name.
func NewCPULimit(name string) (*CPULimit, error) {
	if st, err := os.Stat(filepath.Join(cpuRoot, "cpu.cfs_quota_us")); err != nil || st.IsDir() {
		return nil, errors.New("no cgroup v1 cpu controller at " + cpuRoot)
	}
	cpuOnce.Do(func() {
		// Groups of earlier runs (this run's have its own tag); only
		// empty ones can go.
		cpuRun = fmt.Sprintf("%08x", rand.Uint32())
		old, _ := filepath.Glob(filepath.Join(cpuRoot, "etcdkeeper-testbed-*"))
		for _, d := range old {
			_ = os.Remove(d)
		}
	})
	dir := filepath.Join(cpuRoot, fmt.Sprintf("etcdkeeper-testbed-%s-%s", cpuRun, name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	return &CPULimit{dir: dir}, nil
}

// Add moves processes into the group; a process that no longer exists is
// skipped. Children forked later inherit the group.
func (l *CPULimit) Add(pids ...int) error {
	var errs []error
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(l.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("moving %d into %s: %w", pid, l.dir, err))
		}
	}
	return errors.Join(errs...)
}

// Set limits the group to percent of one core (100: a whole core).
func (l *CPULimit) Set(percent int) error {
	return os.WriteFile(filepath.Join(l.dir, "cpu.cfs_quota_us"), []byte(strconv.Itoa(percent*1000)), 0o644) // period 100 ms
}

// Clear lifts the limit.
func (l *CPULimit) Clear() error {
	return os.WriteFile(filepath.Join(l.dir, "cpu.cfs_quota_us"), []byte("-1"), 0o644)
}

// Throttled is how often the group was throttled so far (cpu.stat's
// nr_throttled): proof that the limit bit.
func (l *CPULimit) Throttled() int {
	b, _ := os.ReadFile(filepath.Join(l.dir, "cpu.stat"))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// Remove moves the group's processes back to the root group and removes it.
func (l *CPULimit) Remove() error {
	_ = l.Clear()
	b, _ := os.ReadFile(filepath.Join(l.dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		_ = os.WriteFile(filepath.Join(cpuRoot, "cgroup.procs"), []byte(f), 0o644)
	}
	return os.Remove(l.dir)
}
