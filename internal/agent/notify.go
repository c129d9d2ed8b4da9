package agent

import (
	"fmt"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// notifier speaks sd_notify to systemd for the agent (never for etcd,
// whose environment has no NOTIFY_SOCKET). Without NOTIFY_SOCKET every
// call is a no-op.
type notifier struct {
	lg       *zap.Logger
	ready    bool
	status   string
	watchdog time.Duration // 0: no watchdog
	lastPing time.Time
}

func newNotifier(lg *zap.Logger) *notifier {
	n := &notifier{lg: lg}
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		n.watchdog = d
	}
	return n
}

func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.lg.Debug("sd_notify", zap.String("state", state), zap.Error(err))
	}
}

// Ready says the agent has its member under way: etcd started, joining or
// repairing, or waiting for a reason it reports in STATUS. It does not
// wait for quorum: starting hosts one after another must not hang on the
// first.
func (n *notifier) Ready() {
	if n.ready {
		return
	}
	n.ready = true
	n.send(daemon.SdNotifyReady)
}

// Status sets the line `systemctl status` shows, when it changed.
func (n *notifier) Status(line string) {
	if line == n.status {
		return
	}
	n.status = line
	n.send("STATUS=" + line)
}

// Ping sends WATCHDOG=1 when half the watchdog interval has passed. It is
// called from the reconcile loop itself, so a wedged loop stops the pings
// and systemd restarts the agent.
func (n *notifier) Ping() {
	if n.watchdog == 0 || time.Since(n.lastPing) < n.watchdog/2 {
		return
	}
	n.lastPing = time.Now()
	n.send(daemon.SdNotifyWatchdog)
}

// Reloading brackets a spec reload: RELOADING=1 with the monotonic time
// systemd requires, then READY=1.
func (n *notifier) Reloading() {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	usec := ts.Sec*1e6 + ts.Nsec/1e3
	n.send(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", usec))
}

func (n *notifier) Reloaded() { n.send(daemon.SdNotifyReady) }

// Stopping says the agent is shutting down.
func (n *notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// maxWait is the longest the loop may sleep so that watchdog pings stay on
// time.
func (n *notifier) maxWait(d time.Duration) time.Duration {
	if n.watchdog > 0 && n.watchdog/2 < d {
		return n.watchdog / 2
	}
	return d
}
