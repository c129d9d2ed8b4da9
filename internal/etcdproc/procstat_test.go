package etcdproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		letter     byte
		cpu        uint64
		err        bool
	}{
		{"etcd sleeping", "4242 (etcd) S 1 4242 4242 0 -1 4194560 9317 0 0 0 120 31 0 0 20 0 12 0 8871 11665408 5113 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0", 'S', 151, false},
		{"stopped", "4242 (etcd) T 1 4242 4242 0 -1 4194560 9317 0 0 0 7 3 0 0 20 0 12 0 8871 11665408 5113", 'T', 10, false},
		{"command with spaces and parentheses", "77 (my (odd) cmd) D 1 77 77 0 -1 0 0 0 0 0 5 5 0 0", 'D', 10, false},
		{"truncated", "77 (etcd) S 1 77", 0, 0, true},
		{"no command", "garbage", 0, 0, true},
		{"utime not a number", "77 (etcd) S 1 77 77 0 -1 0 0 0 0 0 x 5 0 0", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, cpu, err := parseStat(tc.line)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if l != tc.letter || cpu != tc.cpu {
				t.Errorf("got %q %d, want %q %d", l, cpu, tc.letter, tc.cpu)
			}
		})
	}
}

func TestClassifyStates(t *testing.T) {
	for _, tc := range []struct {
		threads string
		want    ProcState
	}{
		{"S", ProcActive},
		{"SSRS", ProcActive},
		{"TTTT", ProcStopped},
		{"t", ProcStopped},
		// A group stop reaches a thread in D only when its I/O returns:
		// the process waits on the disk, it is not frozen.
		{"TTDT", ProcDiskSleep},
		{"DSSS", ProcDiskSleep},
		// Some threads stopped, some not (a stop in progress): not yet.
		{"TTS", ProcActive},
		{"TTZ", ProcStopped},
		{"Z", ProcGone},
		{"", ProcGone},
	} {
		if got := ClassifyStates([]byte(tc.threads)); got != tc.want {
			t.Errorf("threads %q: %s, want %s", tc.threads, got, tc.want)
		}
	}
}

// TestStillness: a sequence of looks at a silent process, with the time,
// its state, CPU time and data dir stamp; what each look reports.
func TestStillness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type look struct {
		at          time.Duration
		state       ProcState
		cpu         uint64
		data        string
		stopped     time.Duration
		still       time.Duration
		description string
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"working: CPU moves", []look{
			{0, ProcActive, 10, "a", 0, 0, "first look"},
			{2 * time.Second, ProcActive, 12, "a", 0, 0, "CPU moved"},
			{4 * time.Second, ProcActive, 14, "a", 0, 0, "CPU moved"},
		}},
		{"frozen by SIGSTOP", []look{
			{0, ProcActive, 10, "a", 0, 0, "first look"},
			{2 * time.Second, ProcStopped, 11, "a", 0, 0, "stopped now"},
			{8 * time.Second, ProcStopped, 11, "a", 6 * time.Second, 6 * time.Second, "stopped and still since"},
		}},
		{"continued after a stop", []look{
			{0, ProcStopped, 10, "a", 0, 0, "first look"},
			{3 * time.Second, ProcStopped, 10, "a", 3 * time.Second, 3 * time.Second, ""},
			{5 * time.Second, ProcActive, 11, "a", 0, 0, "SIGCONT"},
		}},
		{"silent, CPU and data still", []look{
			{0, ProcActive, 10, "a", 0, 0, ""},
			{10 * time.Second, ProcActive, 10, "a", 0, 10 * time.Second, ""},
			{30 * time.Second, ProcActive, 10, "a", 0, 30 * time.Second, ""},
		}},
		{"run time moves within a clock tick", []look{
			{0, ProcActive, 10, "a", 0, 0, ""},
			{10 * time.Second, ProcActive, 10, "a", 0, 10 * time.Second, "nothing moved"},
			{20 * time.Second, ProcActive, 10, "a", 0, 0, "ran 50µs: moved"},
		}},
		{"data dir moves (a snapshot arrives)", []look{
			{0, ProcActive, 10, "a", 0, 0, ""},
			{10 * time.Second, ProcActive, 10, "b", 0, 0, "data moved"},
			{20 * time.Second, ProcActive, 10, "b", 0, 10 * time.Second, ""},
		}},
		{"waiting on the disk (D) is never still", []look{
			{0, ProcActive, 10, "a", 0, 0, ""},
			{10 * time.Second, ProcDiskSleep, 10, "a", 0, 0, "D"},
			{30 * time.Second, ProcDiskSleep, 10, "a", 0, 0, "still D"},
			{32 * time.Second, ProcActive, 10, "a", 0, 2 * time.Second, "back from D, still since"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Stillness
			for i, l := range tc.looks {
				x := ProcSample{State: l.state, CPU: l.cpu, RunNS: 1000}
				if l.description == "ran 50µs: moved" {
					x.RunNS += 50000
				}
				stopped, still := s.Observe(t0.Add(l.at), x, l.data)
				if stopped != l.stopped || still != l.still {
					t.Errorf("look %d (%s): stopped %s, still %s; want %s, %s", i, l.description, stopped, still, l.stopped, l.still)
				}
			}
		})
	}
}

// TestReadProcOfStoppedProcess reads a real child's state: active,
// stopped by SIGSTOP, active again after SIGCONT; and Kill ends a
// stopped process at once with the exit saying the agent did it.
func TestReadProcOfStoppedProcess(t *testing.T) {
	dir := t.TempDir()
	s := NewSupervisor(zap.NewNop(), dir+"/etcd.pid", time.Minute)
	p, err := s.Start(Command{Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}}, dir+"/data")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = s.Kill("test over") }()
	waitState := func(want ProcState) ProcSample {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			x, err := ReadProc(p.PID())
			if err != nil {
				t.Fatal(err)
			}
			if x.State == want {
				return x
			}
			if time.Now().After(deadline) {
				t.Fatalf("process state %s (%c), want %s", x.State, x.Letter, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitState(ProcActive)
	if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	a := waitState(ProcStopped)
	time.Sleep(100 * time.Millisecond)
	if b := waitState(ProcStopped); b.CPU != a.CPU || b.RunNS != a.RunNS {
		t.Errorf("a stopped process used CPU: %d then %d ticks, ran %d then %d ns", a.CPU, b.CPU, a.RunNS, b.RunNS)
	}
	if a.RunNS == 0 {
		t.Logf("no schedstat here: only clock ticks count")
	}
	if err := syscall.Kill(p.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState(ProcActive)
	if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(ProcStopped)
	done := make(chan Exit, 1)
	go func() {
		e, err := s.Kill("stopped process")
		if err != nil {
			t.Error(err)
		}
		done <- e
	}()
	select {
	case e := <-done:
		if !strings.HasPrefix(e.String(), "killed by the agent") || e.ByAgent != "stopped process" {
			t.Errorf("exit %q (by agent %q), want the agent's kill", e.String(), e.ByAgent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Kill of a stopped process did not return")
	}
	if x, err := ReadProc(p.PID()); err != nil || x.State != ProcGone {
		t.Errorf("after Kill: %s, %v", x.State, err)
	}
}

// TestStopEscalationIsTheAgents: a process that ignores SIGTERM is
// killed by Stop after its timeout, and the exit says the agent killed
// it, not an operator.
func TestStopEscalationIsTheAgents(t *testing.T) {
	dir := t.TempDir()
	s := NewSupervisor(zap.NewNop(), dir+"/etcd.pid", 200*time.Millisecond)
	p, err := s.Start(Command{Path: "/bin/sh", Args: []string{"-c", "trap '' TERM; echo ready >&2; while :; do sleep 0.05; done"}}, dir+"/data")
	if err != nil {
		t.Fatal(err)
	}
	// Until the shell has set its trap, SIGTERM ends it: the test would
	// see an exit by SIGTERM, not the agent's kill (a fixed 200 ms wait
	// may be too short for a shell to start on a loaded machine).
	waitIgnoresTERM(t, p.PID())
	e, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.String(), "killed by the agent") || !strings.Contains(e.ByAgent, "after SIGTERM") {
		t.Errorf("exit %q, want the agent's kill after SIGTERM", e.String())
	}
}

// TestReadProcOfIdleProcess: a process that wakes only briefly (every
// 100 ms, as raft ticks) may use no whole clock tick for a while; its
// run time moves anyway, so it is never taken for still.
func TestReadProcOfIdleProcess(t *testing.T) {
	dir := t.TempDir()
	s := NewSupervisor(zap.NewNop(), dir+"/etcd.pid", time.Minute)
	p, err := s.Start(Command{Path: "/bin/sh", Args: []string{"-c", "while :; do sleep 0.1; done"}}, dir+"/data")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = s.Kill("test over") }()
	var st Stillness
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		x, err := ReadProc(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		if x.RunNS == 0 {
			t.Skip("no schedstat here")
		}
		if _, still := st.Observe(time.Now(), x, "same"); still > 500*time.Millisecond {
			t.Fatalf("a process that wakes every 100 ms still for %s: %+v", still, x)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitIgnoresTERM waits until process pid ignores SIGTERM (its SigIgn in
// /proc/pid/status has SIGTERM's bit).
func waitIgnoresTERM(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
				if err != nil {
					t.Fatalf("SigIgn %q: %v", hex, err)
				}
				if mask&(1<<(uint(syscall.SIGTERM)-1)) != 0 {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d does not ignore SIGTERM after 20 s", pid)
		}
	}
}
