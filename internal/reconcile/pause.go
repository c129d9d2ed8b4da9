package reconcile

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Paused holds back what Decide would do while an operator's pause is in
// force: only what keeps the local process alive passes — nothing, a
// wait, staying idle, and starting the existing member as it is (after a crash, within
// the restart backoff). Every other step (a membership change, the cluster
// lock taken for one, a repair, a rejoin step, a recovery step, a restart
// for settings, a disarm, a stop) becomes a wait that says what it would
// have been. Starting etcd in a mode that changes membership or data (a
// new cluster, a rejoin, a forced start) is such a step.
func Paused(p model.Pause, now time.Time, would Action) Action {
	held := PauseText(p, now)
	switch {
	case would.Kind == DoNothing || would.Kind == DoWait || (would.Kind == DoIdle && !would.Start.MoveData):
		// An idle that moves a removed member's data aside is a data
		// move: held back below.
		// Nothing is held back: say the pause, then what the pass saw.
		would.Reason = held + "; " + would.Reason
		would.Key = "paused/" + would.Key
		return would
	case would.Kind == DoStart && would.Start.Action == ActStartAsIs, would.Kind == DoEndTurn:
		// A turn that ends gives a disruption back: nothing is stopped.
		return would
	}
	return Action{Kind: DoWait, Key: "paused/" + would.Key, ReleaseLock: true,
		Reason: held + "; would now: " + wouldDo(would)}
}

// wouldDo says what a held-back step would have done: a step's kind and
// its reason; the first pass toward a change takes the cluster lock, and
// its reason names the change ("taking the cluster lock to rejoin: ...").
func wouldDo(a Action) string {
	if a.Kind == DoTakeLock {
		return a.Reason
	}
	return fmt.Sprintf("%s (%s)", a.Kind, a.Reason)
}

// LocalPaused begins the decision of an agent held by a pause kept on
// its own host (taken without quorum).
const LocalPaused = "paused on this host"

// PauseText says who paused the agents, for how long and why: "paused by
// root@node1 for 1h12m more: replacing a disk".
func PauseText(p model.Pause, now time.Time) string {
	var b strings.Builder
	b.WriteString("paused")
	if p.Local {
		b.WriteString(LocalPaused[len("paused"):])
	}
	if p.By != "" {
		b.WriteString(" by " + p.By)
	}
	if p.Until.IsZero() {
		b.WriteString(" until etcdkeeper resume")
	} else {
		b.WriteString(" for " + Approx(p.Until.Sub(now)) + " more")
	}
	if p.Reason != "" {
		b.WriteString(": " + p.Reason)
	}
	return b.String()
}

// Approx is a duration as an operator reads it: whole seconds, without
// the trailing zero units ("1h12m", "3s", "2h").
func Approx(d time.Duration) string {
	if d < time.Second {
		return "<1s"
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
