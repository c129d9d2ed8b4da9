package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// SkipTB is TB that can skip (testing.T, testing.B).
type SkipTB interface {
	TB
	Skipf(format string, args ...any)
}

// EtcdBinary is a plain etcd binary of version ("v3.6.16") built from its
// Go module, cached across runs under the user cache dir
// (etcdkeeper-test/etcd/<version>/etcd; ETCDKEEPER_TEST_CACHE overrides
// the root). `go install go.etcd.io/etcd/server/v3@version` refuses
// (etcd's server module carries replace directives), so it is built from
// a throwaway module that requires it: the first build takes minutes, a
// cached one nothing. The test is skipped when the module cannot be
// fetched (no Go module proxy).
func EtcdBinary(t SkipTB, version string) string {
	t.Helper()
	root := os.Getenv("ETCDKEEPER_TEST_CACHE")
	if root == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("cache dir: %v", err)
		}
		root = filepath.Join(dir, "etcdkeeper-test")
	}
	dir := filepath.Join(root, "etcd", version)
	bin := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	// One build at a time per version, across test processes.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", dir, err)
	}
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	mod := t.TempDir()
	files := map[string]string{
		"go.mod":   "module etcdbuild\n\ngo 1.24\n",
		"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"go.etcd.io/etcd/server/v3\"\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
		return cmd.CombinedOutput()
	}
	if out, err := run("get", "go.etcd.io/etcd/server/v3@"+version); err != nil {
		t.Skipf("cannot fetch etcd %s's module (no Go module proxy?): %v: %s", version, err, out)
	}
	tmp := bin + ".tmp"
	if out, err := run("build", "-trimpath", "-o", tmp, "go.etcd.io/etcd/server/v3"); err != nil {
		t.Fatalf("build etcd %s: %v: %s", version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Fprintf(os.Stderr, "built etcd %s into %s\n", version, bin)
	return bin
}
