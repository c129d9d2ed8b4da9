package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netnsEnv marks the re-executed test binary that runs one test in a
// network namespace of its own; its value is the network namespace of the
// process that started it (/proc/self/ns/net), which the child's must not
// be.
const netnsEnv = "ETCDKEEPER_TEST_OWN_NETNS"

// inOwnNetns runs the calling top-level test in a fresh network namespace,
// so that it can listen on addresses other than loopback without touching
// this machine's network (the way test/testbed's Isolate does for a whole
// program). The first call re-executes the test binary with -test.run
// naming only this test, in a new network namespace (killed if this
// process dies), streams its output into t's log, fails t if it fails, and
// returns false: the caller returns. In the re-executed binary, it brings
// loopback up, adds addrs (CIDRs, e.g. 198.18.0.1/32 from the benchmarking
// range 198.18.0.0/15) to it and returns true: the caller runs the test
// body, which reaches nothing outside its namespace. It skips the test
// when not root or without the ip command.
func inOwnNetns(t *testing.T, addrs ...string) bool {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("inOwnNetns: call it from a top-level test")
	}
	parentNS, child := os.LookupEnv(netnsEnv)
	if child {
		ownNS, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		// A fresh network namespace has nothing but loopback, down.
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		if parentNS == "" || ownNS == parentNS || len(ifs) != 1 || ifs[0].Flags&net.FlagLoopback == 0 || ifs[0].Flags&net.FlagUp != 0 {
			t.Fatalf("%s=%q is set, but this process is not in a fresh network namespace of its own (%s, interfaces %v): not touching this network", netnsEnv, parentNS, ownNS, ifs)
		}
		cmds := [][]string{{"ip", "link", "set", "lo", "up"}}
		for _, a := range addrs {
			cmds = append(cmds, []string{"ip", "addr", "add", a, "dev", "lo"})
		}
		for _, c := range cmds {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
			}
		}
		return true
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: the test runs in a network namespace of its own (CLONE_NEWNET)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command is not installed: the test sets up addresses in a network namespace of its own")
	}
	ownNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	// The child times out (and prints its goroutines) before this test
	// binary does.
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - 10*time.Second; left > 0 {
			args = append(args, "-test.timeout", left.String())
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = append(os.Environ(), netnsEnv+"="+ownNS)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		// Sent when the thread that started the child ends: keep this
		// goroutine on it until the child is reaped.
		Pdeathsig: syscall.SIGKILL,
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatalf("re-executing %s in a new network namespace: %v", t.Name(), err)
	}
	noTests := false
	br := bufio.NewReader(r)
	for {
		line, rerr := br.ReadString('\n')
		if line = strings.TrimRight(line, "\n"); line != "" || rerr == nil {
			t.Log("netns| " + line)
			noTests = noTests || strings.Contains(line, "testing: warning: no tests to run")
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				t.Errorf("reading the child's output: %v", rerr)
			}
			break
		}
	}
	err = cmd.Wait()
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err != nil:
		t.Fatalf("%s in its own network namespace: %v after %v (its output above)", t.Name(), err, took)
	case noTests:
		t.Fatalf("%s in its own network namespace ran no test", t.Name())
	}
	t.Logf("%s in its own network namespace passed in %v", t.Name(), took)
	return false
}
