package etcdproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WritePIDFile records the etcd child's PID so that a restarted agent can
// find an etcd it left behind.
func WritePIDFile(path string, pid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pid file dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// StopLeftover stops an etcd that a previous agent started for dataDir
// and that is still running (the kernel's Pdeathsig normally kills it with
// the agent; this covers an etcd started by other means or still exiting).
// It only touches a process whose command line names dataDir. It returns
// the PID it stopped, or 0.
func StopLeftover(pidFile, dataDir string, timeout time.Duration) (int, error) {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, nil
	}
	if !isEtcdFor(pid, dataDir) {
		return 0, nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return 0, nil
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !isEtcdFor(pid, dataDir) {
			return pid, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50 && isEtcdFor(pid, dataDir); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if isEtcdFor(pid, dataDir) {
		return pid, fmt.Errorf("leftover etcd pid %d for %s survives SIGKILL", pid, dataDir)
	}
	return pid, nil
}

func isEtcdFor(pid int, dataDir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	// A zombie has an empty command line: it is gone as far as we care.
	return bytes.Contains(b, []byte("--data-dir="+dataDir+"\x00"))
}
