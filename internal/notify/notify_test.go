package notify

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// listen stands in for systemd: a unixgram socket set as NOTIFY_SOCKET.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// next returns the next datagram, or "" when none comes within wait.
func next(t *testing.T, conn *net.UnixConn, wait time.Duration) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func monotonicUsec(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Skipf("no monotonic clock: %v", err)
	}
	return ts.Nano() / 1000
}

var reloading = regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=([0-9]+)$`)

func TestDatagrams(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int(time.Hour/time.Microsecond)))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n := New(zap.NewNop())
	expect := func(want string) {
		t.Helper()
		if got := next(t, conn, 5*time.Second); got != want {
			t.Fatalf("datagram %q, want %q", got, want)
		}
	}

	n.Ready()
	n.Ready()
	expect("READY=1")

	n.Status("starting")
	n.Status("starting")
	n.Status("running")
	expect("STATUS=starting")
	expect("STATUS=running")

	stop := n.Watchdog()
	expect("WATCHDOG=1") // at once
	stop()

	before := monotonicUsec(t)
	n.Reloading()
	after := monotonicUsec(t)
	got := next(t, conn, 5*time.Second)
	m := reloading.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("datagram %q, want RELOADING=1\\nMONOTONIC_USEC=<now>", got)
	}
	if usec, _ := strconv.ParseInt(m[1], 10, 64); usec < before || usec > after {
		t.Errorf("MONOTONIC_USEC=%d, want within [%d, %d]", usec, before, after)
	}
	n.Reloaded()
	expect("READY=1")

	n.Stopping()
	expect("STOPPING=1")
	if extra := next(t, conn, 100*time.Millisecond); extra != "" {
		t.Errorf("unexpected datagram %q", extra)
	}
}

func TestWatchdogForAnotherPID(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	n := New(zap.NewNop())
	stop := n.Watchdog()
	defer stop()
	if got := next(t, conn, 600*time.Millisecond); got != "" {
		t.Errorf("datagram %q, want none: the watchdog is another process's", got)
	}
}

// pingGaps collects the WATCHDOG=1 datagrams for d and returns the longest
// gap between two of them (from the start of d for the first), and the
// time of the last one.
func pingGaps(t *testing.T, conn *net.UnixConn, d time.Duration) (longest time.Duration, last time.Time, pings int) {
	t.Helper()
	start := time.Now()
	prev := start
	for end := start.Add(d); time.Now().Before(end); {
		got := next(t, conn, time.Until(end))
		if got == "" {
			continue
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("unexpected datagram %q", got)
		}
		now := time.Now()
		longest = max(longest, now.Sub(prev))
		prev, last = now, now
		pings++
	}
	return max(longest, time.Since(prev)), last, pings
}

// TestWatchdogAcrossSteadyPeriod: with a 1 s watchdog, a loop that works
// for a few milliseconds and then waits 5 s (the agent's steady period)
// still gets a WATCHDOG=1 at least every half second; a loop wedged in a
// pass stops getting them once the pass ran for its patience, so systemd
// restarts the agent.
func TestWatchdogAcrossSteadyPeriod(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n := New(zap.NewNop())
	if n.patience != passBudget {
		t.Errorf("patience with a 1 s watchdog: %v, want %v (a graceful etcd stop fits in a pass)", n.patience, passBudget)
	}
	n.patience = time.Second // for a short test: a pass wedges after 1 s
	stop := n.Watchdog()
	defer stop()

	loop := make(chan struct{})
	go func() { // two steady passes: 20 ms of work, then 5 s of waiting
		defer close(loop)
		for range 2 {
			n.Busy()
			time.Sleep(20 * time.Millisecond)
			n.Idle()
			time.Sleep(5 * time.Second)
		}
	}()
	longest, _, pings := pingGaps(t, conn, 10*time.Second)
	<-loop
	// systemd kills at the watchdog interval; the pinger aims at a
	// quarter of it (a loaded machine may delay a tick, never by 750 ms).
	if longest >= time.Second {
		t.Errorf("longest gap between WATCHDOG=1 across two 5 s waits: %v, want < 1s (the watchdog interval)", longest)
	}
	if pings < 15 {
		t.Errorf("%d pings in 10 s with a 1 s watchdog, want one every 250ms", pings)
	}

	n.Busy() // the loop wedges in a pass
	wedged := time.Now()
	_, last, _ := pingGaps(t, conn, 3*time.Second)
	if last.After(wedged.Add(time.Second + 200*time.Millisecond)) {
		t.Errorf("WATCHDOG=1 %v after the loop wedged in a pass: a stuck loop must stop the pings once a pass ran for its patience (1 s here)", last.Sub(wedged))
	}
	n.Idle() // it comes back: pings again
	if got := next(t, conn, 2*time.Second); got != "WATCHDOG=1" {
		t.Errorf("after the loop waits again: datagram %q, want WATCHDOG=1", got)
	}
}

func TestNoSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	n := New(zap.NewNop())
	n.Ready()
	n.Status("x")
	n.Watchdog()()
	n.Reloading()
	n.Reloaded()
	n.Stopping()
}

// TestWhilePingsOnlyOnProgress: during a long step, WATCHDOG=1 keeps
// coming while the step makes progress, and stops once it makes none for
// a whole watchdog interval; before READY=1 each ping also extends the
// start timeout.
func TestWhilePingsOnlyOnProgress(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int((400 * time.Millisecond).Microseconds())))
	n := New(zap.NewNop())
	var progress atomic.Int64
	stop := n.While(progress.Load)
	moving := time.Now().Add(time.Second)
	go func() {
		for time.Now().Before(moving) {
			progress.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var pings, extends int
	var lastPing time.Time
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		switch d := next(t, conn, 200*time.Millisecond); {
		case d == "WATCHDOG=1":
			pings++
			lastPing = time.Now()
		case strings.HasPrefix(d, "EXTEND_TIMEOUT_USEC="):
			extends++
		case d != "":
			t.Fatalf("unexpected datagram %q", d)
		}
	}
	stop()
	if pings < 6 || extends < 6 {
		t.Errorf("%d pings and %d extensions during a second of progress, want one every 100ms", pings, extends)
	}
	// Progress stopped at `moving`; pings may go on for one interval.
	if lastPing.After(moving.Add(600 * time.Millisecond)) {
		t.Errorf("last ping %s after progress stopped: the watchdog would never catch a stuck step", lastPing.Sub(moving))
	}
}
