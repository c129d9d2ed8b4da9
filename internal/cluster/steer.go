package cluster

import (
	"slices"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Steering. clientv3 spreads its calls over every endpoint it was given.
// A member whose disk hangs keeps answering Status from memory, but every
// linearizable call routed to it (MemberList, the lock's txn, a Get)
// waits until its deadline: with one of three endpoints frozen, about a
// third of an agent's calls failed, and agents could not observe or take
// the lock for minutes. So after each observation the client's endpoints
// are narrowed to the members that keep up, and widened again as soon as
// they do.

// steer returns the endpoints of configured that the client should use
// after observing v: every configured endpoint except those of a member
// that does not keep up (its Status failed, it has no leader, it is a
// learner, or it is not caught up: model.CaughtUp). An endpoint that is no
// member's client URL is kept (the observation says nothing about it);
// when nothing would be left, all of configured (a cluster that is down
// as a whole is best found out through every endpoint).
func steer(configured []string, v model.Cluster) []string {
	lagging := map[string]bool{}
	for _, m := range v.Members {
		if m.Err != "" || m.Leader == 0 || m.IsLearner || !m.CaughtUp {
			for _, u := range m.ClientURLs {
				lagging[u] = true
			}
		}
	}
	use := slices.DeleteFunc(slices.Clone(configured), func(e string) bool { return lagging[e] })
	if len(use) == 0 {
		return slices.Clone(configured)
	}
	return use
}

// steerTo points the client at endpoints when they differ from those it
// uses now.
func (c *Client) steerTo(endpoints []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil || slices.Equal(c.active, endpoints) {
		return
	}
	if c.active == nil && slices.Equal(c.endpoints, endpoints) {
		return
	}
	c.c.SetEndpoints(endpoints...)
	c.active = endpoints
}

// Active is the endpoints the client's calls go to now (see steer).
func (c *Client) Active() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active == nil {
		return slices.Clone(c.endpoints)
	}
	return slices.Clone(c.active)
}
