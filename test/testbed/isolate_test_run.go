package testbed

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// RunIsolated runs the calling top-level test again in Isolate's private
// network, mount and PID namespaces, so that it can use the network test
// bed (NewOnNet) from `go test`: the first call re-executes the test
// binary with -test.run naming only this test (and ETCDKEEPER_BIN set to
// Binary, so it is not built again), streams its output into t's log,
// fails t if it fails, and returns false: the caller returns. In the
// re-executed binary it prepares the namespaces (SetupIsolated) and
// returns true: the caller runs the test body. Everything the body
// starts dies with the re-executed binary. It skips the test where the
// bed cannot run (CanIsolate).
func RunIsolated(t *testing.T) bool {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("RunIsolated: call it from a top-level test")
	}
	if Isolated() {
		if err := SetupIsolated(); err != nil {
			t.Fatalf("network test bed: %v", err)
		}
		return true
	}
	if why := CanIsolate(); why != "" {
		t.Skipf("the network test bed cannot run here: %s", why)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1", "-test.timeout=20m")
	cmd.Env = append(os.Environ(), isolatedEnv+"=1", "ETCDKEEPER_BIN="+Binary)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("re-executing %s in private namespaces: %v", t.Name(), err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	passed := false
	for sc.Scan() {
		t.Log(sc.Text())
		passed = passed || strings.HasPrefix(strings.TrimSpace(sc.Text()), "--- PASS: "+t.Name()+" ")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s in private namespaces: %v", t.Name(), err)
	}
	if !passed {
		t.Fatalf("%s in private namespaces did not pass (skipped, or not run)", t.Name())
	}
	return false
}
