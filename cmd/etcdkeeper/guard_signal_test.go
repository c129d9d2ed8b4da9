package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestMain runs this test binary as etcdkeeper itself when
// ETCDKEEPER_TEST_MAIN is set: the guard's signal tests need it in a
// process of its own, to signal and to kill.
func TestMain(m *testing.M) {
	if os.Getenv("ETCDKEEPER_TEST_MAIN") != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// turnAgent is a fake agent for one guard: it grants the turn at once
// (or never, when waiting), and records the work done (or the wish
// withdrawn).
type turnAgent struct {
	waiting bool
	id      atomic.Value // the wish's ID
	done    atomic.Bool
}

func (a *turnAgent) serve(w http.ResponseWriter, r *http.Request) {
	phase := model.TurnGranted
	if a.waiting {
		phase = model.TurnWaiting
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/turn":
		var wish model.TurnWish
		if err := json.NewDecoder(r.Body).Decode(&wish); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.id.Store(wish.ID)
	case r.Method == http.MethodPost && r.URL.Path == "/turn/done":
		a.done.Store(true)
	}
	if a.done.Load() {
		phase = model.TurnEnded
	}
	id, _ := a.id.Load().(string)
	_ = json.NewEncoder(w).Encode(model.TurnProgress{ID: id, Phase: phase, Text: string(phase) + " by the fake agent"})
}

// startGuardProcess runs `etcdkeeper guard -- sh -c script` (this test
// binary as etcdkeeper) in dir, against agent on the control socket of
// a one-member spec.
func startGuardProcess(t *testing.T, dir string, agent *turnAgent, script string) (*exec.Cmd, guardOutput) {
	t.Helper()
	specPath, stateDir := writeTurnSpec(t, dir)
	fakeAgent(t, stateDir, 0, agent.serve)
	out := guardOutput(filepath.Join(dir, "guard.out"))
	f, err := os.Create(string(out))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := exec.Command(os.Args[0], "guard", "--config", specPath, "--name", "node1", "--", "sh", "-c", script)
	g.Dir, g.Stdout, g.Stderr = dir, f, f
	g.Env = append(os.Environ(), "ETCDKEEPER_TEST_MAIN=1")
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Process.Kill()
		_, _ = g.Process.Wait()
		var pid int
		if b, err := os.ReadFile(filepath.Join(dir, "cmd.pid")); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL) // a CMD left behind
			}
		}
	})
	return g, out
}

// writeTurnSpec writes the spec of one member, node1, whose state dir
// (where its agent's control socket is) is dir.
func writeTurnSpec(t *testing.T, dir string) (path, stateDir string) {
	t.Helper()
	path = filepath.Join(dir, "cluster.yaml")
	text := fmt.Sprintf("cluster: {name: c1}\nmembers:\n  - {name: node1, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}\nagent: {stateDir: %q}\n", dir)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, s.Members[0].StateDir
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, out guardOutput, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s; the guard said:\n%s", what, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// guardOutput is the guard's output, in a file: a pipe would keep
// Wait from returning while a CMD left behind holds it open.
type guardOutput string

func (o guardOutput) String() string {
	b, _ := os.ReadFile(string(o))
	return string(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// gone: process pid has exited (gone, or a zombie nobody reaped yet).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	b, err := os.ReadFile(path)
	if err == nil {
		_, err = fmt.Sscan(string(b), &pid)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// trapScript traps the three signals, says which came, and exits 7;
// it writes its PID (cmd.pid) once the traps are set.
const trapScript = `trap 'echo TERM > got; exit 7' TERM; trap 'echo INT > got; exit 7' INT; trap 'echo HUP > got; exit 7' HUP; echo $$ > cmd.pid; while :; do sleep 0.1; done`

// plainScript dies of the signal.
const plainScript = `echo $$ > cmd.pid; while :; do sleep 0.1; done`

// TestGuardSignals: a guard signalled (SIGINT, SIGTERM, SIGHUP) while
// CMD runs passes the signal to CMD, waits for it, returns the turn and
// exits with CMD's status (128+N when CMD died of signal N); signalled
// while it waits for the turn, it withdraws the wish and exits 128+N.
func TestGuardSignals(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	tests := []struct {
		name    string
		sig     syscall.Signal
		script  string
		waiting bool   // the turn never comes
		got     string // what CMD says it got ("": nothing)
		want    int
	}{
		{name: "SIGTERM, CMD traps it", sig: syscall.SIGTERM, script: trapScript, got: "TERM", want: 7},
		{name: "SIGINT, CMD traps it", sig: syscall.SIGINT, script: trapScript, got: "INT", want: 7},
		{name: "SIGHUP, CMD traps it", sig: syscall.SIGHUP, script: trapScript, got: "HUP", want: 7},
		{name: "SIGTERM, CMD dies of it", sig: syscall.SIGTERM, script: plainScript, want: 128 + int(syscall.SIGTERM)},
		{name: "SIGHUP, CMD dies of it", sig: syscall.SIGHUP, script: plainScript, want: 128 + int(syscall.SIGHUP)},
		{name: "SIGTERM while waiting for the turn", sig: syscall.SIGTERM, script: trapScript, waiting: true, want: 128 + int(syscall.SIGTERM)},
		{name: "SIGINT while waiting for the turn", sig: syscall.SIGINT, script: trapScript, waiting: true, want: 128 + int(syscall.SIGINT)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shortTempDir(t)
			agent := &turnAgent{waiting: tt.waiting}
			g, out := startGuardProcess(t, dir, agent, tt.script)
			if tt.waiting {
				waitFor(t, "the guard waits for its turn", out, func() bool { return strings.Contains(out.String(), "waiting") })
			} else {
				waitFor(t, "CMD runs", out, func() bool { return exists(filepath.Join(dir, "cmd.pid")) })
			}
			if err := g.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			err := g.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.want {
				t.Errorf("the guard exited %d (%v), want %d; it said:\n%s", code, err, tt.want, out)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "got")); strings.TrimSpace(string(b)) != tt.got {
				t.Errorf("CMD got %q, want %q: the guard did not pass the signal on, or did not wait for CMD", strings.TrimSpace(string(b)), tt.got)
			}
			if tt.waiting && exists(filepath.Join(dir, "cmd.pid")) {
				t.Errorf("CMD ran though the turn never came")
			}
			if !agent.done.Load() {
				t.Errorf("the guard did not tell the agent (work done, or the wish withdrawn); it said:\n%s", out)
			}
			if !tt.waiting {
				if pid := readPID(t, filepath.Join(dir, "cmd.pid")); !gone(pid) {
					t.Errorf("CMD (pid %d) runs on after the guard exited", pid)
				}
			}
		})
	}
}

// TestGuardKilledTakesCMDWithIt: a guard killed outright (SIGKILL, the
// OOM killer) cannot return the turn nor hold it: its CMD must not go
// on outside the turn (Pdeathsig).
func TestGuardKilledTakesCMDWithIt(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := shortTempDir(t)
	g, out := startGuardProcess(t, dir, &turnAgent{}, `echo $$ > cmd.pid; exec sleep 1000`)
	waitFor(t, "CMD runs", out, func() bool { return exists(filepath.Join(dir, "cmd.pid")) })
	pid := readPID(t, filepath.Join(dir, "cmd.pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := g.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = g.Wait()
	waitFor(t, fmt.Sprintf("CMD (pid %d) ends with its killed guard", pid), out, func() bool { return gone(pid) })
}

// shortTempDir is a temporary dir with a short path: a unix socket's
// path has room for 107 bytes.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "guard-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestGuardTakesThePassedSignal: a SIGTERM that reached CMD while it ran
// (a shutdown's, during `systemctl reboot`) is the guard's too once the
// host is found shutting down: its context ends with it, instead of the
// guard waiting for a second SIGTERM that never comes (systemd kills it
// only after its stop timeout).
func TestGuardTakesThePassedSignal(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	s := catchSignals(context.Background())
	defer s.stop()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("sh", "-c", "trap 'exit 0' TERM; touch "+ready+"; while :; do sleep 0.05; done")
	if err := s.start(cmd); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !exists(ready); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("CMD did not set its trap")
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("CMD did not get the SIGTERM passed on: %v", err)
	}
	s.mu.Lock()
	s.child = nil
	s.mu.Unlock()
	if s.ctx.Err() != nil {
		t.Fatal("the guard took a signal passed on to CMD as its own before it was asked to")
	}
	s.takePassed()
	select {
	case <-s.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the guard's context did not end with the SIGTERM CMD got")
	}
	if sig, ok := errors.AsType[*signalled](context.Cause(s.ctx)); !ok || sig.sig != syscall.SIGTERM {
		t.Errorf("cause %v, want the SIGTERM", context.Cause(s.ctx))
	}
}
