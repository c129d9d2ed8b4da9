package agent

import (
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
