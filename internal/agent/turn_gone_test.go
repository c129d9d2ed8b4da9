package agent

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestGuardGoneClockWaitsForTheShutdown: a guard gone in this boot
// without saying its command is done settles its turn after
// guardGoneSettle, but not while the host shuts down or has a shutdown
// scheduled: a slow or delayed reboot keeps the turn until it stops the
// agent.
func TestGuardGoneClockWaitsForTheShutdown(t *testing.T) {
	stopping := false
	defer func(f func() bool) { hostStopping = f }(hostStopping)
	hostStopping = func() bool { return stopping }
	w := &model.TurnWish{ID: "w1", Kind: model.TurnGuard, Boot: bootID(), PID: -1, Granted: true}
	a := &Agent{}
	if d := a.goneFor(w); d > time.Second {
		t.Fatalf("first seen gone: %s, want about 0", d)
	}
	a.turnGoneAt = a.turnGoneAt.Add(-2 * guardGoneSettle)
	if tl := turnLocal(w, time.Now(), a.goneFor(w)); !tl.Settled || tl.Active {
		t.Fatalf("gone for %s, no shutdown: %+v, want settled", 2*guardGoneSettle, tl)
	}
	stopping = true
	if tl := turnLocal(w, time.Now(), a.goneFor(w)); tl.Settled {
		t.Fatalf("gone long, the host shutting down: %+v, want not settled", tl)
	}
	stopping = false
	if tl := turnLocal(w, time.Now(), a.goneFor(w)); tl.Settled {
		t.Fatalf("a shutdown called off a moment ago: %+v, want the clock started again", tl)
	}
}

// TestGuardHiddenByProc: the packaged unit runs the agent as etcd with
// ProtectProc=invisible, where /proc hides the guard (root's process):
// its wish is taken all the same, the guard counts as running while a
// process of its PID exists, and as gone once none does.
func TestGuardHiddenByProc(t *testing.T) {
	defer func(d string) { procDir = d }(procDir)
	procDir = t.TempDir() // a /proc that shows no process
	a := newTestAgent(t, "", nil)
	_, self := a.Spec()
	self.StateDir = t.TempDir()
	a.self = self

	if _, err := a.WishTurn(model.TurnWish{Kind: model.TurnGuard, Why: "guard: systemctl reboot", PID: os.Getpid(), ID: "w1"}); err != nil {
		t.Fatalf("a guard /proc hides: %v, want its wish taken", err)
	}
	w := a.loadWish()
	if w == nil || w.PIDStart != 0 {
		t.Fatalf("wish kept: %+v, want one with PIDStart 0 (not read)", w)
	}
	if !guardAlive(w) {
		t.Fatal("the hidden guard runs: guardAlive says it is gone")
	}
	if tl := turnLocal(w, time.Now(), a.goneFor(w)); !tl.Active {
		t.Fatalf("the hidden guard runs: %+v, want active", tl)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	w2 := *w
	w2.PID = gone.Process.Pid
	if guardAlive(&w2) {
		t.Fatalf("guard %d has exited: guardAlive says it runs", w2.PID)
	}

	// A process /proc shows under the PID of a guard it hid is another
	// one.
	procDir = "/proc"
	if guardAlive(w) {
		t.Fatal("a visible process under the PID of a hidden guard: guardAlive says it is the guard")
	}
}
