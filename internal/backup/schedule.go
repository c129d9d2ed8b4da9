package backup

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Retry after a failed snapshot: retryBase, doubling with each failure in
// a row, never later than the interval.
const retryBase = 10 * time.Second

// RestoreCheckEvery is how often the newest snapshot is restored and
// compared (and once after the first snapshot of each run).
const RestoreCheckEvery = 24 * time.Hour

// NextRun is when the next snapshot is due: an interval after the last
// success; after failures, a retry with backoff. A last success in the
// future (the clock was set back, or the newest file's time came from a
// clock ahead) counts as none: due now, never in a year.
func NextRun(now, lastOK, lastFail time.Time, failures int, interval time.Duration) time.Time {
	due := now
	if !lastOK.IsZero() && !lastOK.After(now) {
		due = lastOK.Add(interval)
	}
	if failures > 0 && !lastFail.IsZero() && !lastFail.After(now) {
		wait := interval
		if failures <= 16 {
			wait = min(interval, retryBase<<(failures-1))
		}
		if retry := lastFail.Add(wait); retry.After(due) {
			due = retry
		}
	}
	return due
}

// restoreCheckDue: no check yet in this run, or the last is a day old (or
// in the future: the clock moved).
func restoreCheckDue(now, last time.Time, interval time.Duration) bool {
	return last.IsZero() || last.After(now) || now.Sub(last) >= max(interval, RestoreCheckEvery)
}

// ErrNoSource is the refusal when no member may be snapshotted now.
var ErrNoSource = errors.New("no healthy member to take a snapshot from")

// ChooseSource picks the member to read a snapshot from: only a healthy,
// started voter of a cluster whose members all answer for it; the local
// member (self) if it is a follower, else the follower with the highest
// raft index, else the leader.
func ChooseSource(v model.Cluster, self string) (model.Member, string, error) {
	if len(v.Foreign) > 0 {
		return model.Member{}, "", fmt.Errorf("%w: members answer for another cluster: %v", ErrNoSource, v.Foreign)
	}
	var cands []model.Member
	for _, m := range v.Members {
		if m.Healthy && !m.IsLearner && !m.Unstarted() && len(m.ClientURLs) > 0 {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return model.Member{}, "", fmt.Errorf("%w: %d members, none a healthy voter", ErrNoSource, len(v.Members))
	}
	follower := func(m model.Member) bool { return m.ID != v.LeaderID && m.Leader != m.ID }
	slices.SortFunc(cands, func(a, b model.Member) int {
		rank := func(m model.Member) int {
			switch {
			case m.Name == self && follower(m):
				return 0
			case follower(m):
				return 1
			}
			return 2
		}
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.RaftIndex, a.RaftIndex), cmp.Compare(a.Name, b.Name))
	})
	m := cands[0]
	switch {
	case m.Name == self && follower(m):
		return m, "the local member, a healthy follower", nil
	case follower(m):
		return m, "a healthy follower", nil
	}
	return m, "the leader: no healthy follower", nil
}
