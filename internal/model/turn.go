package model

import (
	"fmt"
	"time"
)

// HostTurn is a host's turn to be disrupted from outside etcdkeeper: a
// reboot, OS patching, hand work (etcdkeeper guard, etcdkeeper
// maintenance). One key in the cluster holds it, so two hosts never hold
// turns together; the disruption budget grants it like any stop of a
// member (one out of service at a time, the leader last, after a
// hand-off). It is not bound to a lease: it outlives the host's reboot,
// and the host's agent ends it once its member is a caught-up voter
// again. A turn whose agent stops renewing it (a host that never came
// back) is released by the others once each has seen it unchanged for
// maintenance.hostTurnTimeout by its own clock, loudly.
type HostTurn struct {
	ID string `json:"id"`
	// Member is the member whose host holds the turn; MemberID its ID
	// when the turn was taken.
	Member   string   `json:"member"`
	MemberID uint64   `json:"memberID"`
	Kind     TurnKind `json:"kind"`
	// Why is what the turn is for, for people ("guard: systemctl
	// reboot"); By who asked (user@host).
	Why string `json:"why"`
	By  string `json:"by,omitempty"`
	// StopEtcd: the host's etcd is stopped for the turn (guard
	// --stop-etcd, maintenance start --stop-etcd).
	StopEtcd bool      `json:"stopEtcd,omitempty"`
	Since    time.Time `json:"since"`
	// Renewed is when the holder's agent last said it is alive.
	Renewed time.Time `json:"renewed"`
	// Boot is the host's boot ID when the turn was taken.
	Boot string `json:"boot,omitempty"`

	// Revision is the key's mod revision (not stored).
	Revision int64 `json:"-"`
	// Unchanged is how long the agent that read the key has seen it at
	// Revision, on its own monotonic clock (not stored): what a release
	// is timed on. Renewed is another host's wall clock, which may be
	// minutes off this one's or step.
	Unchanged time.Duration `json:"-"`
}

// TurnKind is who holds a host turn.
type TurnKind string

const (
	// TurnGuard: etcdkeeper guard -- CMD runs a command in the turn; it
	// ends when the command has run (or the host rebooted) and the member
	// is a caught-up voter again.
	TurnGuard TurnKind = "guard"
	// TurnMaintenance: etcdkeeper maintenance start; it ends at
	// maintenance end, once the member is a caught-up voter again.
	TurnMaintenance TurnKind = "maintenance"
)

// Of: t is the turn of wish w, taken by member's host (nil t: no).
func (t *HostTurn) Of(w *TurnWish, member string) bool {
	return t != nil && w != nil && t.ID == w.ID && t.Member == member
}

// Expired: the agent that read t has seen it unrenewed for longer than
// timeout, by its own clock.
func (t *HostTurn) Expired(timeout time.Duration) bool {
	return t != nil && timeout > 0 && t.Unchanged > timeout
}

// Text says who holds the turn, for what and since when: "node2's host
// turn (guard: systemctl reboot, by root@node2, since 10:02:11)".
func (t *HostTurn) Text() string {
	by := ""
	if t.By != "" {
		by = ", by " + t.By
	}
	return fmt.Sprintf("%s's host turn (%s%s, since %s)", t.Member, t.Why, by, t.Since.Format(time.TimeOnly))
}

// TurnWish is what this host's operator asked of its agent through the
// control socket (etcdkeeper guard, maintenance start): the turn it
// waits for, holds, or is giving back. The agent keeps it in its state
// dir, so that a restart of the agent (a package upgrade inside the
// turn) loses neither the wish nor the turn.
type TurnWish struct {
	ID       string   `json:"id"`
	Kind     TurnKind `json:"kind"`
	Why      string   `json:"why"`
	By       string   `json:"by,omitempty"`
	StopEtcd bool     `json:"stopEtcd,omitempty"`
	// PID and PIDStart are the guard's process (its start time in clock
	// ticks since boot, from /proc/PID/stat): the wish of a guard that is
	// gone is over. Boot is the boot ID it was made in.
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pidStart,omitempty"`
	Boot     string `json:"boot,omitempty"`
	// At is when it was asked.
	At time.Time `json:"at"`
	// Granted: the agent took the turn for it (the cluster's key names
	// ID).
	Granted bool `json:"granted,omitempty"`
	// Done: the command has run, or maintenance end was asked: the turn
	// ends once the member is a caught-up voter again.
	Done   bool      `json:"done,omitempty"`
	DoneAt time.Time `json:"doneAt,omitempty"`
}

// TurnLocal is what a pass knows of this host's wish: what the decision
// reads (model.Local.Turn).
type TurnLocal struct {
	// Wish is the wish kept in the state dir (nil: none).
	Wish *TurnWish
	// Active: the turn's work is under way: a guard whose command runs
	// in this boot, or a maintenance not yet ended. A turn held by this
	// host that is not active is returning: it ends when the member is a
	// caught-up voter again.
	Active bool
	// Settled: the wish was marked done long enough ago (a command that
	// asked for a reboot returns before the shutdown begins).
	Settled bool
}

// TurnPhase is where this host's wish stands, as its agent tells the
// command that asked (GET /turn).
type TurnPhase string

const (
	TurnWaiting   TurnPhase = "waiting"
	TurnGranted   TurnPhase = "granted"
	TurnReturning TurnPhase = "returning"
	TurnEnded     TurnPhase = "ended"
)

// TurnProgress is the answer of GET /turn: the wish, where it stands and
// why.
type TurnProgress struct {
	ID    string    `json:"id,omitempty"`
	Phase TurnPhase `json:"phase"`
	Text  string    `json:"text"`
	// EtcdStopped: the local etcd is not running (for --stop-etcd).
	EtcdStopped bool `json:"etcdStopped,omitempty"`
	// Turn is the cluster's turn as last read (nil: none).
	Turn *HostTurn `json:"turn,omitempty"`
}
