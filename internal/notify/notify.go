// Package notify speaks sd_notify to systemd for the agent (never for
// etcd, whose environment has no NOTIFY_SOCKET): readiness, the status
// line, watchdog pings, reloads and shutdown. Without NOTIFY_SOCKET every
// call is a no-op.
package notify

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
)

// Notifier sends the agent's sd_notify messages. Ready, Status,
// Reloading and Stopping are the reconcile loop's (not safe for concurrent
// use); Busy and Idle may be called from anywhere.
type Notifier struct {
	lg       *zap.Logger
	ready    bool
	status   string
	watchdog time.Duration // 0: no watchdog
	// patience is how long a pass may run before the loop counts as
	// wedged: max(watchdog, passBudget).
	patience time.Duration
	epoch    time.Time // monotonic base of busySince
	// busySince is when the loop last left its wait (nanoseconds since
	// epoch, +1 so that 0 means "waiting"). See Watchdog.
	busySince atomic.Int64
}

// New reads the watchdog interval systemd gave this process
// (WATCHDOG_USEC, WATCHDOG_PID).
func New(lg *zap.Logger) *Notifier {
	n := &Notifier{lg: lg, epoch: time.Now()}
	n.Busy()
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		n.watchdog, n.patience = d, max(d, passBudget)
	}
	return n
}

func (n *Notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.lg.Debug("sd_notify", zap.String("state", state), zap.Error(err))
	}
}

// Ready says the agent has its member under way: etcd started, joining or
// repairing, or waiting for a reason it reports in STATUS. It does not
// wait for quorum: starting hosts one after another must not hang on the
// first.
func (n *Notifier) Ready() {
	if n.ready {
		return
	}
	n.ready = true
	n.send(daemon.SdNotifyReady)
}

// Status sets the line `systemctl status` shows, when it changed.
func (n *Notifier) Status(line string) {
	if line == n.status {
		return
	}
	n.status = line
	n.send("STATUS=" + line)
}

// Busy says the loop has left its wait: a pass, or the start before the
// first one. Idle says it waits again (for its timer, a wake or its end).
func (n *Notifier) Busy() { n.busySince.Store(int64(time.Since(n.epoch)) + 1) }

// Idle: see Busy.
func (n *Notifier) Idle() { n.busySince.Store(0) }

// busyFor is how long the loop has been busy, 0 while it waits.
func (n *Notifier) busyFor() time.Duration {
	b := n.busySince.Load()
	if b == 0 {
		return 0
	}
	return time.Since(n.epoch) - time.Duration(b-1)
}

// passBudget is the least time a pass may run before the loop counts as
// wedged: its longest bounded step, a graceful stop of etcd (SIGTERM, 10 s,
// then SIGKILL), fits in it. Under a short WatchdogSec (3 s) such a stop
// must not get the agent killed; an etcd in D state that SIGKILL cannot
// end, or a pass stuck for good, still does.
const passBudget = 15 * time.Second

// Watchdog pings WATCHDOG=1 every quarter of the watchdog interval — so
// systemd sees one at least every half interval whatever the loop's
// period (it sleeps 5 s once steady, longer than a 3 s WatchdogSec) —
// but only while the loop is waiting, or busy in a pass for less than
// max(WatchdogSec, passBudget). A loop wedged in a pass stops the pings
// then, and systemd restarts the agent one interval later. A long step
// that still makes progress keeps systemd patient with While. The
// returned stop ends the pinger and waits for it.
func (n *Notifier) Watchdog() (stop func()) {
	if n.watchdog == 0 {
		return func() {}
	}
	every := n.watchdog / 4
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		wedged := false
		for {
			if busy := n.busyFor(); busy < n.patience {
				wedged = false
				n.send(daemon.SdNotifyWatchdog)
			} else if !wedged {
				wedged = true
				n.lg.Warn("a pass has run too long: no more watchdog pings from the loop",
					zap.Duration("busy", busy.Round(time.Millisecond)), zap.Duration("watchdog", n.watchdog))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// Reloading brackets a spec reload: RELOADING=1 with the monotonic time
// systemd requires, then Reloaded.
func (n *Notifier) Reloading() {
	// RELOADING=1 first: systemd logs a notification by its first field,
	// and operators (and the e2e test bed) look for that line.
	n.send(daemon.SdNotifyReloading + "\n" + strings.TrimSuffix(daemon.SdNotifyMonotonicUsec(), "\n"))
}

// Reloaded ends a reload: READY=1.
func (n *Notifier) Reloaded() { n.send(daemon.SdNotifyReady) }

// Stopping says the agent is shutting down.
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// startupExtension is how much more time each EXTEND_TIMEOUT_USEC asks
// for while a long step runs before READY=1.
const startupExtension = 30 * time.Second

// While keeps systemd patient during one long step of the loop (a full
// check of a multi-GB db, a large snapshot download): every quarter of the
// watchdog interval it pings WATCHDOG=1 — and before READY=1 it extends
// the start timeout (EXTEND_TIMEOUT_USEC) — but only while progress()
// keeps changing. A step that stops making progress for a whole watchdog
// interval gets no more pings, and systemd restarts the agent: the
// watchdog stays honest about a stuck loop. The returned stop ends it;
// call it from the loop when the step is over.
func (n *Notifier) While(progress func() int64) (stop func()) {
	if n.watchdog == 0 && n.ready {
		return func() {}
	}
	every, patience := startupExtension/4, startupExtension
	if n.watchdog > 0 {
		every, patience = n.watchdog/4, n.watchdog
	}
	ready := n.ready
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		last, lastChange := progress(), time.Now()
		stuck := false
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if p := progress(); p != last {
				last, lastChange = p, time.Now()
			}
			if time.Since(lastChange) > patience {
				if !stuck {
					stuck = true
					n.lg.Warn("a long step made no progress: no more watchdog pings", zap.Duration("for", time.Since(lastChange).Round(time.Second)))
				}
				continue
			}
			if !ready {
				n.send(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", startupExtension.Microseconds()))
			}
			if n.watchdog > 0 {
				n.send(daemon.SdNotifyWatchdog)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
