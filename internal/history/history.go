// Package history keeps what the agents changed, or refused to change
// for a reason worth knowing: one Event per change, kept in the cluster
// (bounded, oldest dropped first) and mirrored in each agent's state dir
// (Mirror), so that it survives a quorum loss. Merge puts the cluster's
// record and the mirrors together again.
package history

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Keep is how many events the cluster and each mirror hold.
const Keep = 1000

// Event is one change an agent made (or refused).
type Event struct {
	Time time.Time `json:"time"`
	// Host is the agent that acted; Member the member it acted on, when
	// another (a remove of a stale member).
	Host   string `json:"host"`
	Member string `json:"member,omitempty"`
	// Kind is what happened: remove, add-learner, promote,
	// update-peer-urls, move-leader, repair-done, repair-retry,
	// repair-refused, join-done, alarm-disarmed, recovery-<step>, ...
	Kind string `json:"kind"`
	// MemberID is the member changed, in hex as etcdctl prints it.
	MemberID string `json:"memberID,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Detail holds what else is worth knowing: where the data went
	// (backup, snapshot), the old and new member IDs, a recovery's ID.
	Detail map[string]string `json:"detail,omitempty"`
}

// ID names the event, the same in the cluster and in every mirror: the
// time to the nanosecond (fixed width, so that IDs sort by time), the
// host and the kind.
func (e Event) ID() string {
	return fmt.Sprintf("%020d-%s-%s", e.Time.UnixNano(), e.Host, e.Kind)
}

// HexID is a member ID as Event.MemberID holds it ("" for none).
func HexID(id uint64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("%x", id)
}

// Merge puts lists of events (the cluster's, the mirrors') together,
// oldest first, each event once.
func Merge(lists ...[]Event) []Event {
	seen := map[string]bool{}
	var out []Event
	for _, l := range lists {
		for _, e := range l {
			if id := e.ID(); !seen[id] {
				seen[id] = true
				out = append(out, e)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return strings.Compare(a.ID(), b.ID()) })
	return out
}

// Since keeps the events at or after t (all of them for a zero t).
func Since(evs []Event, t time.Time) []Event {
	i, _ := slices.BinarySearchFunc(evs, t, func(e Event, t time.Time) int { return e.Time.Compare(t) })
	return evs[i:]
}

// last keeps the last n of l.
func last[T any](l []T, n int) []T {
	if len(l) > n {
		return l[len(l)-n:]
	}
	return l
}
