package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"go.uber.org/zap"
)

// TestCPUTicks: a busy process's CPU time rises; the watchdog is fed by
// that during a long data-dir check.
func TestCPUTicks(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	first := cpuTicks(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for cpuTicks(cmd.Process.Pid) <= first {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time of a busy loop stayed at %d", first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := cpuTicks(os.Getpid() + 1_000_000); got != 0 {
		t.Errorf("CPU time of a process that does not exist: %d", got)
	}
}

// TestInspectFeedsWatchdogOnlyWhileBusy runs the data-dir check as a child
// process, as the agent does, with a stand-in for "etcdkeeper inspect":
// one that works (uses CPU) for longer than the watchdog interval, and
// one that hangs. Pings go on while the check works and stop while it
// hangs, so systemd restarts an agent whose check is stuck.
func TestInspectFeedsWatchdogOnlyWhileBusy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		pinged bool
	}{
		{"busy", `end=$(($(date +%s) + 4)); while [ $(date +%s) -lt $end ]; do :; done; echo '{"Reason":"stand-in"}'`, true},
		{"hung", `sleep 3; echo '{"Reason":"stand-in"}'`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			self := filepath.Join(dir, "fake-etcdkeeper")
			if err := os.WriteFile(self, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "notify.sock")
			conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			t.Setenv("NOTIFY_SOCKET", sock)
			t.Setenv("WATCHDOG_USEC", "1000000")
			a := newTestAgent(t, self, nil)
			a.notify.Ready()
			pings := watchdogPings(conn)
			start := time.Now()
			if _, err := a.inspectChild(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if took < 2*time.Second {
				t.Fatalf("the check took %s, not longer than the watchdog interval: proves nothing", took)
			}
			late := 0 // pings more than a watchdog interval after the start
			for len(pings) > 0 {
				if (<-pings).Sub(start) > 1500*time.Millisecond {
					late++
				}
			}
			if tc.pinged && late == 0 {
				t.Errorf("no watchdog ping while the check worked for %s", took)
			}
			if !tc.pinged && late > 0 {
				t.Errorf("%d watchdog pings while the check hung: a stuck agent would never be restarted", late)
			}
		})
	}
}

// newTestAgent is an agent of a one-member spec, not started; self is the
// binary it would run, lg its logger (nil: none).
func newTestAgent(t *testing.T, self string, lg *zap.Logger) *Agent {
	t.Helper()
	s, err := spec.Parse([]byte(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Spec: s, Name: "a", Self: self, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRecentSnapshot: a verified scheduled snapshot stands for a repair's
// safety snapshot only when repair.snapshotMaxAge allows and it is young
// enough; an unverified one, an old one, or one "from the future" never.
func TestRecentSnapshot(t *testing.T) {
	a := newTestAgent(t, "", nil)
	s, self := a.Spec()
	self.SnapshotDir = t.TempDir()
	a.self = self
	write := func(taken time.Time, rev int64, verified bool) string {
		file := backup.FileName(s.Cluster.Name, taken, rev)
		if err := os.WriteFile(filepath.Join(self.SnapshotDir, file), []byte("db"), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("db"))
		side, _ := json.Marshal(backup.Sidecar{Cluster: s.Cluster.Name, Member: "a", File: file, TakenAt: taken, Verified: verified, Seq: rev,
			SHA256: hex.EncodeToString(sum[:]), Source: backup.Source{ClusterID: "c1d"}})
		if err := os.WriteFile(filepath.Join(self.SnapshotDir, backup.SidecarName(file)), side, 0o600); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(self.SnapshotDir, file)
	}
	now := time.Now()
	write(now.Add(-time.Hour), 10, true)
	if _, ok := a.recentSnapshot(0xc1d); !ok {
		t.Fatalf("not reused with the default repair.snapshotMaxAge (%s, twice backup.interval)", s.Repair.SnapshotMaxAge)
	}
	s.Repair.SnapshotMaxAge.Duration = 0
	if _, ok := a.recentSnapshot(0xc1d); ok {
		t.Fatalf("reused with repair.snapshotMaxAge 0")
	}
	s.Repair.SnapshotMaxAge.Duration = 10 * time.Minute
	if _, ok := a.recentSnapshot(0xc1d); ok {
		t.Errorf("reused a snapshot an hour old with snapshotMaxAge 10m")
	}
	write(now.Add(-time.Minute), 20, false)
	if _, ok := a.recentSnapshot(0xc1d); ok {
		t.Errorf("reused an unverified snapshot")
	}
	want := write(now.Add(-2*time.Minute), 30, true)
	if got, ok := a.recentSnapshot(0xc1d); !ok || got != want {
		t.Errorf("recentSnapshot = %q, %v; want %q", got, ok, want)
	}
	write(now.Add(time.Hour), 40, true)
	if got, ok := a.recentSnapshot(0xc1d); ok && got != want {
		t.Errorf("reused a snapshot taken in the future: %q", got)
	}
	if got, ok := a.recentSnapshot(0x7417); ok {
		t.Errorf("reused %q, a snapshot of another cluster (same name)", got)
	}
}

// watchdogPings is when each WATCHDOG=1 arrives on conn, the test's
// NOTIFY_SOCKET, until it is closed.
func watchdogPings(conn *net.UnixConn) <-chan time.Time {
	pings := make(chan time.Time, 100)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if string(buf[:n]) == "WATCHDOG=1" {
				pings <- time.Now()
			}
		}
	}()
	return pings
}
