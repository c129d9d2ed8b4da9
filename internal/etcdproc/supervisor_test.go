package etcdproc

import (
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 8 * time.Second}
	if d := b.Next(); d != 0 {
		t.Fatalf("first restart after %v, want at once", d)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		d := b.Next()
		if d < want-want/10 || d > want+want/10 {
			t.Errorf("restart %d after %v, want %v ±10%%", i+2, d, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != 0 {
		t.Errorf("after a reset: %v, want at once", d)
	}
}

// TestSupervisorReap runs real short-lived processes: an exit is reaped
// once, with its status, and the restart is scheduled by the backoff.
func TestSupervisorReap(t *testing.T) {
	dir := t.TempDir()
	s := NewSupervisor(zap.NewNop(), dir+"/etcd.pid", time.Second)
	if _, err := s.Start(Command{Path: "/bin/sh", Args: []string{"-c", "echo dying >&2; exit 3"}}, dir+"/data"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("process did not exit")
	}
	e, ok := s.Reap()
	if !ok || e.Code != 3 || len(e.Tail) == 0 || e.Tail[len(e.Tail)-1] != "dying" {
		t.Fatalf("Reap = %+v, %v; want exit status 3 with its last line", e, ok)
	}
	if _, again := s.Reap(); again {
		t.Errorf("an exit was reaped twice")
	}
	if d := s.ScheduleRestart(false); d != 0 || s.RestartIn() != 0 {
		t.Errorf("first restart in %v, want at once", d)
	}
	if d := s.ScheduleRestart(false); d == 0 || s.RestartIn() == 0 {
		t.Errorf("second restart at once, want a backoff")
	}
	if d := s.ScheduleRestart(true); d != 0 || s.RestartIn() != 0 {
		t.Errorf("an immediate restart waits %v", d)
	}
}

func TestSupervisorStop(t *testing.T) {
	dir := t.TempDir()
	s := NewSupervisor(zap.NewNop(), dir+"/etcd.pid", 5*time.Second)
	if _, err := s.Start(Command{Path: "/bin/sleep", Args: []string{"60"}}, dir+"/data"); err != nil {
		t.Fatal(err)
	}
	if !s.Running() {
		t.Fatal("not running after start")
	}
	e, err := s.Stop()
	if err != nil || e.Signal == "" {
		t.Fatalf("Stop = %+v, %v; want killed by SIGTERM", e, err)
	}
	if s.Running() || s.Process() != nil {
		t.Errorf("still supervising a process after Stop")
	}
}
