// Package integration runs real etcdkeeper agents, each with its real etcd
// child, on loopback addresses 127.0.0.x with free ports. Nothing here is a
// mock: the tests drive the binary the README's users run.
package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration tests skipped under -short")
		os.Exit(0)
	}
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	if b := os.Getenv("ETCDKEEPER_BIN"); b != "" {
		testbed.Binary = b
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "etcdkeeper-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	testbed.Binary = filepath.Join(dir, "etcdkeeper")
	cmd := exec.Command("go", "build", "-o", testbed.Binary, "../../cmd/etcdkeeper")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("build etcdkeeper: %w", err)
	}
	return m.Run(), nil
}
