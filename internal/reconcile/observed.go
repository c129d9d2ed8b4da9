package reconcile

import (
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
)

// ObservedFrom turns a cluster view into Plan's input. pending remembers
// since when each learner or unstarted member has been pending; it is
// updated in place (nil: everything pending counts from now).
func ObservedFrom(v cluster.View, pending map[uint64]time.Time, now time.Time) Observed {
	if pending == nil {
		pending = map[uint64]time.Time{}
	}
	obs := Observed{LeaderID: v.LeaderID, Now: now}
	seen := map[uint64]bool{}
	for _, m := range v.Members {
		ms := MemberState{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			IsLearner: m.IsLearner, Healthy: m.Healthy, RaftIndex: m.RaftIndex}
		if m.IsLearner || m.Name == "" {
			if _, ok := pending[m.ID]; !ok {
				pending[m.ID] = now
			}
			ms.PendingSince = pending[m.ID]
			seen[m.ID] = true
		}
		obs.Members = append(obs.Members, ms)
	}
	for id := range pending {
		if !seen[id] {
			delete(pending, id)
		}
	}
	return obs
}
