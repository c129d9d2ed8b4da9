// Package notify speaks sd_notify to systemd for the agent (never for
// etcd, whose environment has no NOTIFY_SOCKET): readiness, the status
// line, watchdog pings, reloads and shutdown. Without NOTIFY_SOCKET every
// call is a no-op.
package notify

import (
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
)

// Notifier sends the agent's sd_notify messages. It is not safe for
// concurrent use: the reconcile loop owns it.
type Notifier struct {
	lg       *zap.Logger
	ready    bool
	status   string
	watchdog time.Duration // 0: no watchdog
	lastPing time.Time
}

// New reads the watchdog interval systemd gave this process
// (WATCHDOG_USEC, WATCHDOG_PID).
func New(lg *zap.Logger) *Notifier {
	n := &Notifier{lg: lg}
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		n.watchdog = d
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

// Ping sends WATCHDOG=1 when half the watchdog interval has passed. It is
// called from the reconcile loop itself, so a wedged loop stops the pings
// and systemd restarts the agent.
func (n *Notifier) Ping() {
	if n.watchdog == 0 || time.Since(n.lastPing) < n.watchdog/2 {
		return
	}
	n.lastPing = time.Now()
	n.send(daemon.SdNotifyWatchdog)
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

// MaxWait is the longest the loop may sleep, at most d, so that watchdog
// pings stay on time.
func (n *Notifier) MaxWait(d time.Duration) time.Duration {
	if n.watchdog > 0 && n.watchdog/2 < d {
		return n.watchdog / 2
	}
	return d
}
