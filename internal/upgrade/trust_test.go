package upgrade

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// nobody is the unprivileged local user of the attacker model.
const nobody = 65534

// asNobody runs a shell command as uid 65534 (setpriv), in dir.
func asNobody(t *testing.T, dir, command string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as uid 65534")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", command)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid 65534: %s: %v: %s", command, err, out)
	}
}

// agentDir makes dir/opt, owned by owner, holding a copy of the running
// image as etcdkeeper (root's, 0755), and a Self as if started from it.
func agentDir(t *testing.T, owner int) (*Self, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opt := filepath.Join(dir, "opt")
	if err := os.Mkdir(opt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(opt, owner, owner); err != nil {
		t.Skipf("chown: %v", err)
	}
	path := filepath.Join(opt, "etcdkeeper")
	replace(t, path, copyOf(procSelf))
	id, err := statID(procSelf)
	if err != nil {
		t.Fatal(err)
	}
	return &Self{Path: path, Build: model.Build{Version: "0.9.0", EtcdVersion: "3.7.3"}, id: id}, dir
}

// TestPlantedBinaryNeverRuns is G1 (safety review 2026-12-03): the
// agent's binary lies in a directory uid 65534 can write; as that user, a
// script that answers `version` is renamed over it. The agent refuses it,
// says why, and never runs it (7595587 ran it at once, as root, for its
// version).
func TestPlantedBinaryNeverRuns(t *testing.T) {
	s, dir := agentDir(t, nobody)
	mark := filepath.Join(dir, "opt", "ran")
	asNobody(t, dir, `printf '#!/bin/sh\nid -u >> `+mark+`\necho "etcdkeeper 9.9.9"\necho "etcd (embedded) 3.7.3"\n' > opt/.new && chmod 755 opt/.new && mv -f opt/.new opt/etcdkeeper`)
	b, why := s.Installed(context.Background())
	if b != nil || !strings.Contains(why, "refused") || !strings.Contains(why, "uid 65534") {
		t.Errorf("a binary planted by uid 65534: Installed = %v %q, want it refused naming the owner", b, why)
	}
	if _, err := os.Stat(mark); err == nil {
		out, _ := os.ReadFile(mark)
		t.Fatalf("the planted binary ran (as uid %s)", strings.TrimSpace(string(out)))
	}
	if err := s.Exec(); err == nil || !strings.Contains(err.Error(), "no checked new binary") {
		t.Errorf("Exec after a refusal: %v, want it refused", err)
	}
}

// TestGroupWritableDirRefused: a directory above the binary that others
// may write (not sticky) is refused even when it is root's.
func TestGroupWritableDirRefused(t *testing.T) {
	s, dir := agentDir(t, 0)
	replace(t, s.Path, script(`echo "etcdkeeper 0.9.1"; echo "etcd (embedded) 3.7.3"`))
	if err := os.Chmod(filepath.Join(dir, "opt"), 0o775); err != nil {
		t.Fatal(err)
	}
	if b, why := s.Installed(context.Background()); b != nil || !strings.Contains(why, "writable by group or others") {
		t.Errorf("a new binary in a group-writable dir: Installed = %v %q, want it refused", b, why)
	}
	// Fixed: a root-owned 0755 directory (under the sticky /tmp): a new
	// file there is a new build.
	if err := os.Chmod(filepath.Join(dir, "opt"), 0o755); err != nil {
		t.Fatal(err)
	}
	replace(t, s.Path, script(`echo "etcdkeeper 0.9.2"; echo "etcd (embedded) 3.7.3"`))
	if b, why := s.Installed(context.Background()); b == nil || b.Version != "0.9.2" {
		t.Errorf("a new binary in a trusted dir: Installed = %v %q, want 0.9.2", b, why)
	}
}

// TestSymlinkRepointed: an agent started through a symlink (a release
// switch: /usr/local/bin/etcdkeeper -> releases/0.9/etcdkeeper) sees the
// link re-pointed to a new release as a new binary (7595587 resolved the
// link at start and never looked at it again).
func TestSymlinkRepointed(t *testing.T) {
	dir := t.TempDir()
	rel := func(v string) string {
		d := filepath.Join(dir, "releases", v)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(d, "etcdkeeper")
	}
	old, next := rel("0.9"), rel("1.0")
	replace(t, old, copyOf(procSelf))
	replace(t, next, script(`echo "etcdkeeper 1.0.0"; echo "etcd (embedded) 3.7.3"`))
	link := filepath.Join(dir, "etcdkeeper")
	if err := os.Symlink(old, link); err != nil {
		t.Fatal(err)
	}
	id, err := statID(procSelf)
	if err != nil {
		t.Fatal(err)
	}
	s := &Self{Path: link, Build: model.Build{Version: "0.9.0", EtcdVersion: "3.7.3"}, id: id}
	if b, why := s.Installed(context.Background()); b != nil || why != "" {
		t.Fatalf("the link to the running release: Installed = %v %q, want nothing", b, why)
	}
	if err := os.Symlink(next, link+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		t.Fatal(err)
	}
	if b, why := s.Installed(context.Background()); b == nil || b.Version != "1.0.0" {
		t.Errorf("the link re-pointed to release 1.0: Installed = %v %q, want 1.0.0", b, why)
	}
}

// TestMain lets this test binary stand for a new agent build: it answers
// `version`, and, exec'd by TestExecRunsTheProbedFile's helper, says so.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("etcdkeeper 0.9.9\netcd (embedded) 3.7.3")
		os.Exit(0)
	}
	if dir := os.Getenv("UPGRADE_EXEC_HELPER"); dir != "" && os.Getenv("UPGRADE_EXECD") != "" {
		_ = os.WriteFile(filepath.Join(dir, "ran"), []byte("probed\n"), 0o600)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExecRunsTheProbedFile: the file exec'd is the one probed, not the
// one at the path by the time of the exec. A child process (this test
// binary again) probes a new build (a copy of this binary, one byte
// longer), finds the path replaced by a script, and execs: the probed
// file runs, through its descriptor.
func TestExecRunsTheProbedFile(t *testing.T) {
	if os.Getenv("UPGRADE_EXEC_HELPER") == "" {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestExecRunsTheProbedFile$", "-test.count=1")
		cmd.Env = append(os.Environ(), "UPGRADE_EXEC_HELPER="+dir)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helper: %v: %s", err, b)
		}
		got, err := os.ReadFile(filepath.Join(dir, "ran"))
		if err != nil || strings.TrimSpace(string(got)) != "probed" {
			t.Fatalf("after the exec %q ran (%v), want the probed file", got, err)
		}
		return
	}
	dir := os.Getenv("UPGRADE_EXEC_HELPER")
	path := filepath.Join(dir, "etcdkeeper")
	replace(t, path, func(f *os.File) {
		copyOf(procSelf)(f)
		_, _ = f.WriteString("\n") // other bytes: a new build
	})
	id, err := statID(procSelf)
	if err != nil {
		t.Fatal(err)
	}
	s := &Self{Path: path, Build: model.Build{Version: "0.9.0", EtcdVersion: "3.7.3"}, id: id}
	if b, why := s.Installed(context.Background()); b == nil || b.Version != "0.9.9" {
		t.Fatalf("Installed = %v %q", b, why)
	}
	replace(t, path, script(`echo swapped > `+filepath.Join(dir, "ran")))
	t.Setenv("UPGRADE_EXECD", "1")
	err = s.Exec()
	t.Fatalf("still running after Exec: %v", err)
}

// TestInvokedPathKeepsTheSymlink: the agent's path is the one it was
// started as, not its target: only then is a re-pointed link seen.
func TestInvokedPathKeepsTheSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "releases", "0.9", "etcdkeeper")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	replace(t, target, script("true"))
	link := filepath.Join(dir, "etcdkeeper")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	defer func(a string) { os.Args[0] = a }(os.Args[0])
	os.Args[0] = link
	if got, err := invokedPath(); err != nil || got != link {
		t.Errorf("invokedPath = %q, %v; want the link %s", got, err, link)
	}
}
