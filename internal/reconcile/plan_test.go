package reconcile

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

var planNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const planTimeout = 10 * time.Minute

func peerURL(name string) string   { return "https://" + name + ":2380" }
func clientURL(name string) string { return "https://" + name + ":2379" }

func specOf(names ...string) []spec.Member {
	var ms []spec.Member
	for _, n := range names {
		ms = append(ms, spec.Member{Name: n, PeerURLs: []string{peerURL(n)}, ClientURLs: []string{clientURL(n)}})
	}
	return ms
}

// specNodes is node1..nodeN.
func specNodes(n int) []spec.Member {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, "node"+string(rune('0'+i)))
	}
	return specOf(names...)
}

type memberMod func(*model.Member)

// mem is a healthy, started voter named name, advertising its default URLs.
func mem(id uint64, name string, mods ...memberMod) model.Member {
	m := model.Member{
		ID: id, Name: name, Healthy: true, CaughtUp: true, RaftIndex: 100,
		PeerURLs: []string{peerURL(name)}, ClientURLs: []string{clientURL(name)},
	}
	for _, mod := range mods {
		mod(&m)
	}
	return m
}

// nodes is node1..nodeN as healthy voters with IDs 1..N.
func nodes(n int, mods map[int][]memberMod) []model.Member {
	var ms []model.Member
	for i := 1; i <= n; i++ {
		ms = append(ms, mem(uint64(i), "node"+string(rune('0'+i)), mods[i]...))
	}
	return ms
}

func down(m *model.Member) { m.Healthy = false }

func learner(pendingFor time.Duration) memberMod {
	return func(m *model.Member) {
		m.IsLearner = true
		m.PendingSince = planNow.Add(-pendingFor)
	}
}

// unstarted: added but never started. It keeps the peer URLs it was added
// with and has no name.
func unstarted(pendingFor time.Duration) memberMod {
	return func(m *model.Member) {
		m.Name = ""
		m.Healthy = false
		m.ClientURLs = nil
		m.RaftIndex = 0
		m.PendingSince = planNow.Add(-pendingFor)
	}
}

func peers(urls ...string) memberMod { return func(m *model.Member) { m.PeerURLs = urls } }
func index(i uint64) memberMod       { return func(m *model.Member) { m.RaftIndex = i } }

func observed(leader uint64, ms ...model.Member) model.Cluster {
	return model.Cluster{Members: ms, LeaderID: leader, Now: planNow}
}

func with(ms []model.Member, more ...model.Member) []model.Member { return append(ms, more...) }

// reasonHas: the reason contains part, or, for a part ending in "$", ends
// with it. The end matters where one rule's reason is a prefix of
// another's ("remove old9: not in the spec" of a healthy extra, "..., unhealthy"
// of a dead one).
func reasonHas(reason, part string) bool {
	if p, ok := strings.CutSuffix(part, "$"); ok {
		return strings.HasSuffix(reason, p)
	}
	return strings.Contains(reason, part)
}

func TestReasonHas(t *testing.T) {
	for _, tt := range []struct {
		reason, part string
		want         bool
	}{
		{"remove old9: not in the spec", "remove old9: not in the spec$", true},
		{"remove old9: not in the spec, unhealthy", "remove old9: not in the spec$", false},
		{"remove old9: not in the spec, unhealthy", "remove old9: not in the spec", true},
		{"remove old9: not in the spec", "unhealthy", false},
	} {
		if got := reasonHas(tt.reason, tt.part); got != tt.want {
			t.Errorf("reasonHas(%q, %q) = %v", tt.reason, tt.part, got)
		}
	}
}

func TestPlan(t *testing.T) {
	opt := Options{LearnerTimeout: planTimeout}
	tests := []struct {
		name    string
		desired []spec.Member
		obs     model.Cluster
		opt     *Options // nil: opt
		kind    StepKind
		id      uint64
		to      uint64
		urls    []string
		// reason is a part of the reason that only the intended rule
		// gives ("...$": the end of it; see reasonHas).
		reason string
	}{
		// Converged clusters.
		{
			name: "1 member matches", desired: specNodes(1), obs: observed(1, nodes(1, nil)...),
			kind: StepNone, reason: "no action: membership matches the spec (1 voter, 1 healthy)",
		},
		{
			name: "3 members match", desired: specNodes(3), obs: observed(2, nodes(3, nil)...),
			kind: StepNone, reason: "no action: membership matches the spec (3 voters, 3 healthy)",
		},
		{
			name: "7 members match", desired: specNodes(7), obs: observed(7, nodes(7, nil)...),
			kind: StepNone, reason: "(7 voters, 7 healthy)",
		},
		{
			name: "unhealthy spec voter is not Plan's to fix", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{2: {down}})...),
			kind: StepNone, reason: "(3 voters, 2 healthy; unhealthy: node2)",
		},
		{
			name: "5 members, 2 down, still nothing to change", desired: specNodes(5),
			obs:  observed(1, nodes(5, map[int][]memberMod{4: {down}, 5: {down}})...),
			kind: StepNone, reason: "unhealthy: node4, node5",
		},

		// Guards: no leader, nothing observed.
		{
			name: "no leader", desired: specNodes(3),
			obs:  observed(0, with(nodes(3, nil), mem(9, "extra9", down))...),
			kind: StepWait, reason: "waiting: no leader",
		},
		{
			name: "leader is not a member", desired: specNodes(3), obs: observed(42, nodes(3, nil)...),
			kind: StepWait, reason: "reported leader 2a is not a member",
		},
		{
			name: "leader reported as a learner", desired: specNodes(3),
			obs:  observed(3, nodes(3, map[int][]memberMod{3: {learner(time.Hour)}})...),
			kind: StepWait, reason: "reported leader node3 is not a started voter",
		},
		{
			name: "no members observed", desired: specNodes(3), obs: observed(0),
			kind: StepWait, reason: "no members observed",
		},

		// Missing members are never added here.
		{
			name: "missing member waits for its agent", desired: specNodes(4), obs: observed(1, nodes(3, nil)...),
			kind: StepWait, reason: "waiting: node4 not registered yet; its agent adds it",
		},
		{
			name: "two missing members", desired: specNodes(5), obs: observed(1, nodes(3, nil)...),
			kind: StepWait, reason: "waiting: node4 not registered yet; its agent adds it; node5 not registered yet",
		},
		{
			name: "missing member does not stop removing a dead extra", desired: specNodes(4),
			obs:  observed(1, with(nodes(3, nil), mem(9, "old9", down))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy",
		},

		// Learners and unstarted members.
		{
			name: "fresh learner waits for its agent to promote it", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{4: {learner(2 * time.Minute)}})...),
			kind: StepWait, reason: "waiting: node4 is a learner for 2m0s; its agent promotes it",
		},
		{
			name: "learner past the timeout is removed", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{4: {learner(20 * time.Minute)}})...),
			kind: StepRemove, id: 4, reason: "remove node4: learner without progress for 20m0s, past the learner timeout 10m0s",
		},
		{
			name: "stale learner is removed even with voters down (no quorum change)", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{2: {down}, 3: {down}, 4: {learner(time.Hour)}})...),
			kind: StepRemove, id: 4, reason: "learner without progress for 1h0m0s",
		},
		{
			name: "zero learner timeout never times out", desired: specNodes(4),
			obs: observed(1, nodes(4, map[int][]memberMod{4: {learner(48 * time.Hour)}})...),
			opt: &Options{}, kind: StepWait, reason: "node4 is a learner for 48h0m0s",
		},
		{
			name: "learner exactly at the timeout stays", desired: specNodes(2),
			obs:  observed(1, nodes(2, map[int][]memberMod{2: {learner(planTimeout)}})...),
			kind: StepWait, reason: "node2 is a learner for 10m0s",
		},
		{
			name: "learner with no pending time yet", desired: specNodes(2),
			obs:  observed(1, nodes(2, map[int][]memberMod{2: {learner(0), func(m *model.Member) { m.PendingSince = time.Time{} }}})...),
			kind: StepWait, reason: "waiting: node2 is a learner; its agent promotes it",
		},
		{
			name: "fresh unstarted member is matched by peer URL", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{4: {unstarted(time.Minute)}})...),
			kind: StepWait, reason: "waiting: node4 added but not started for 1m0s; its agent starts it",
		},
		{
			name: "unstarted voter past the timeout is removed when quorum holds", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{4: {unstarted(time.Hour)}})...),
			kind: StepRemove, id: 4, reason: "remove node4: unstarted without progress for 1h0m0s, past the learner timeout 10m0s",
		},
		{
			name: "unstarted voter past the timeout waits when removal breaks quorum", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{2: {down}, 3: {down}, 4: {unstarted(time.Hour)}})...),
			kind: StepWait, reason: "node4 is due for removal (unstarted without progress for 1h0m0s, past the learner timeout 10m0s), " +
				"but removing it would leave 1 of 3 voters healthy, below quorum 2 (unhealthy: node2, node3)",
		},
		{
			name: "unstarted learner past the timeout is removed without quorum check", desired: specNodes(4),
			obs:  observed(1, nodes(4, map[int][]memberMod{2: {down}, 3: {down}, 4: {unstarted(time.Hour), learner(time.Hour)}})...),
			kind: StepRemove, id: 4, reason: "remove node4: unstarted without progress for 1h0m0s",
		},
		{
			name: "stale learners go before dead extras (they hold the learner slot)", desired: specNodes(4),
			obs: observed(1, with(nodes(4, map[int][]memberMod{4: {learner(time.Hour)}}),
				mem(9, "aaa-old", down))...),
			kind: StepRemove, id: 4, reason: "past the learner timeout",
		},
		{
			name: "stale learner before stale unstarted voter", desired: specNodes(5),
			obs: observed(1, nodes(5, map[int][]memberMod{
				4: {unstarted(2 * time.Hour)}, 5: {learner(time.Hour)},
			})...),
			kind: StepRemove, id: 5, reason: "remove node5: learner",
		},
		{
			name: "longest pending learner first", desired: specNodes(5),
			obs: observed(1, nodes(5, map[int][]memberMod{
				4: {learner(time.Hour)}, 5: {learner(2 * time.Hour)},
			})...),
			kind: StepRemove, id: 5, reason: "learner without progress for 2h0m0s",
		},
		{
			name: "unstarted member whose name-twin runs is extra", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(77, "node3", unstarted(time.Minute)))...),
			kind: StepRemove, id: 77, reason: "remove unstarted member 4d: not in the spec, never started",
		},
		{
			name: "unstarted member with unknown URLs is extra", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(0xab, "stray", unstarted(time.Second)))...),
			kind: StepRemove, id: 0xab, reason: "remove unstarted member ab: not in the spec, never started",
		},

		// Two members with one spec name: a host rejoining. Its agent
		// removes the stale entry; Plan must not race it.
		{
			name: "duplicate name: dead old voter and new learner are left to the agent", desired: specNodes(3),
			obs: observed(1, with(nodes(3, map[int][]memberMod{3: {down}}),
				mem(0x21, "node3", learner(time.Minute), peers("https://10.0.0.3:2380")))...),
			kind: StepWait, reason: "waiting: node3 is registered 2 times (3, 21); its agent removes the stale entry",
		},
		{
			name: "duplicate name: a learner past the timeout still goes", desired: specNodes(3),
			obs: observed(1, with(nodes(3, map[int][]memberMod{3: {down}}),
				mem(0x21, "node3", learner(time.Hour), peers("https://10.0.0.3:2380")))...),
			kind: StepRemove, id: 0x21, reason: "remove node3: learner without progress for 1h0m0s",
		},

		// Extra members.
		{
			name: "dead extra voter is removed", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(9, "old9", down))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy",
		},
		{
			name: "dead extra goes before a healthy extra", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(8, "aaa"), mem(9, "zzz", down))...),
			kind: StepRemove, id: 9, reason: "remove zzz: not in the spec, unhealthy",
		},
		{
			name: "dead extra learner before dead extra voter", desired: specNodes(3),
			obs: observed(1, with(nodes(3, nil), mem(8, "aaa", down),
				mem(9, "zzz", down, learner(time.Minute)))...),
			kind: StepRemove, id: 9, reason: "remove zzz: not in the spec, unhealthy",
		},
		{
			name: "healthy extra voter is removed", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(9, "old9"))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec$",
		},
		{
			name: "healthy extra learner is removed", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(9, "old9", learner(time.Minute)))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec$",
		},
		{
			name: "two healthy extras go by name", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, nil), mem(10, "old-b"), mem(11, "old-a"))...),
			kind: StepRemove, id: 11, reason: "remove old-a: not in the spec$",
		},
		{
			name: "dead extras, 7 members, one spec member missing", desired: specNodes(6),
			obs: observed(1, with(nodes(5, map[int][]memberMod{5: {down}}),
				mem(20, "gone-b", down), mem(21, "gone-a", down))...),
			kind: StepRemove, id: 21, reason: "remove gone-a: not in the spec, unhealthy",
		},

		// Quorum.
		{
			name: "removing the extra would break quorum of the new membership", desired: specNodes(3),
			obs:  observed(1, mem(1, "node1"), mem(2, "node2", down), mem(9, "old9")),
			kind: StepWait, reason: "waiting: old9 is due for removal (not in the spec), " +
				"but removing it would leave 1 of 2 voters caught up, below quorum 2 (unhealthy: node2)",
		},
		{
			name: "removing the extra keeps quorum when both remaining are healthy", desired: specNodes(3),
			obs:  observed(1, mem(1, "node1"), mem(2, "node2"), mem(9, "old9")),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec$",
		},
		{
			name: "dead extra blocked when the cluster already lost quorum", desired: specNodes(3),
			obs: observed(1, mem(1, "node1"), mem(2, "node2"), mem(3, "node3", down),
				mem(8, "old8", down), mem(9, "old9", down)),
			kind: StepWait, reason: "waiting: old8 is due for removal (not in the spec, unhealthy), but removing it would leave 2 of 4 voters healthy, below quorum 3",
		},
		{
			name: "dead extra in 4 voters, 2 healthy: new membership of 3 needs 2", desired: specNodes(3),
			obs:  observed(1, mem(1, "node1"), mem(2, "node2"), mem(3, "node3", down), mem(9, "old9", down)),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy",
		},
		{
			name: "last voter is never removed", desired: specNodes(1),
			obs:  observed(9, mem(9, "old9")),
			kind: StepWait, reason: "waiting: old9 is due for removal (not in the spec), but it is the last voter",
		},
		{
			name: "last voter stays, its learner extra goes", desired: specNodes(1),
			obs:  observed(1, mem(1, "node1"), mem(9, "old9", learner(time.Minute))),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec$",
		},
		{
			name: "1-member cluster with the spec member unstarted and stale", desired: specOf("node1", "node2"),
			obs:  observed(1, mem(1, "node1"), mem(2, "node2", unstarted(time.Hour))),
			kind: StepRemove, id: 2, reason: "remove node2: unstarted",
		},

		// Leader placement.
		{
			name: "leader is the healthy extra: move it to the most caught-up spec voter", desired: specNodes(3),
			obs: observed(9, mem(1, "node1", index(100)), mem(2, "node2", index(120)),
				mem(3, "node3", index(110)), mem(9, "old9", index(130))),
			kind: StepMoveLeader, id: 9, to: 2, reason: "move leader from old9 to node2 (applied index 120): old9 is due for removal (not in the spec)$",
		},
		{
			name: "leader move skips an unhealthy spec voter", desired: specNodes(3),
			obs: observed(9, mem(1, "node1", index(100)), mem(2, "node2", index(120), down),
				mem(3, "node3", index(110)), mem(9, "old9")),
			kind: StepMoveLeader, id: 9, to: 3, reason: "move leader from old9 to node3 (applied index 110): old9 is due for removal (not in the spec)$",
		},
		{
			name: "leader move skips a learner", desired: specNodes(3),
			obs: observed(9, mem(1, "node1", index(100)), mem(2, "node2", index(120)),
				mem(3, "node3", index(500), learner(time.Minute)), mem(9, "old9")),
			kind: StepMoveLeader, id: 9, to: 2, reason: "move leader from old9 to node2 (applied index 120): old9 is due for removal (not in the spec)$",
		},
		{
			name: "leader move ties go to the first name", desired: specNodes(3),
			obs:  observed(9, mem(3, "node3"), mem(2, "node2"), mem(1, "node1"), mem(9, "old9")),
			kind: StepMoveLeader, id: 9, to: 1, reason: "move leader from old9 to node1 (applied index 100): old9 is due for removal (not in the spec)$",
		},
		{
			name: "leader move comes before removing other healthy extras", desired: specNodes(3),
			obs:  observed(9, with(nodes(3, nil), mem(8, "aaa-old"), mem(9, "old9"))...),
			kind: StepMoveLeader, id: 9, to: 1, reason: "move leader from old9 to node1 (applied index 100): old9 is due for removal (not in the spec)$",
		},
		{
			name: "dead extra leader: move first", desired: specNodes(3),
			obs:  observed(9, with(nodes(3, nil), mem(9, "old9", down))...),
			kind: StepMoveLeader, id: 9, to: 1, reason: "old9 is due for removal (not in the spec, unhealthy)",
		},
		{
			name: "leader extra whose removal breaks quorum: no pointless move", desired: specNodes(3),
			obs:  observed(9, mem(1, "node1"), mem(2, "node2", down), mem(9, "old9")),
			kind: StepWait, reason: "old9 is due for removal (not in the spec), but removing it would leave 1 of 2 voters caught up",
		},
		{
			name: "leader extra with no spec voter to take over: remove another extra", desired: specOf("node1"),
			obs:  observed(9, mem(9, "old9"), mem(8, "old8"), mem(1, "node1", learner(time.Minute))),
			kind: StepRemove, id: 8, reason: "remove old8: not in the spec$",
		},
		{
			name: "leader extra alone with a learner: last voter", desired: specOf("node1"),
			obs:  observed(9, mem(9, "old9"), mem(1, "node1", learner(time.Minute))),
			kind: StepWait, reason: "it is the last voter",
		},

		// Peer URLs.
		{
			name: "voter with old peer URL is updated", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{2: {peers("https://10.0.0.2:2380")}})...),
			kind: StepUpdatePeerURLs, id: 2, urls: []string{peerURL("node2")},
			reason: "update peer URLs of node2: [https://10.0.0.2:2380] -> [https://node2:2380]",
		},
		{
			name: "unhealthy voter with old peer URL is updated", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{3: {down, peers("https://10.0.0.3:2380")}})...),
			kind: StepUpdatePeerURLs, id: 3, urls: []string{peerURL("node3")},
			reason: "update peer URLs of node3: [https://10.0.0.3:2380] -> [https://node3:2380]",
		},
		{
			name: "the leader's own peer URL is updated", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{1: {peers("https://10.0.0.1:2380")}})...),
			kind: StepUpdatePeerURLs, id: 1, reason: "update peer URLs of node1: [https://10.0.0.1:2380] -> [https://node1:2380]",
		},
		{
			name: "peer URL order does not matter", desired: []spec.Member{{Name: "node1", PeerURLs: []string{"https://a:2380", "https://b:2380"}}},
			obs:  observed(1, mem(1, "node1", peers("https://b:2380", "https://a:2380"))),
			kind: StepNone, reason: "no action: membership matches the spec (1 voter, 1 healthy)",
		},
		{
			name: "learner with old peer URL is never updated", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{3: {learner(time.Minute), peers("https://10.0.0.3:2380")}})...),
			kind: StepWait, reason: "waiting: learner node3 has peer URLs [https://10.0.0.3:2380], spec says [https://node3:2380]; a learner is never updated",
		},
		{
			name: "learner with old peer URL past the timeout is removed", desired: specNodes(3),
			obs:  observed(1, nodes(3, map[int][]memberMod{3: {learner(time.Hour), peers("https://10.0.0.3:2380")}})...),
			kind: StepRemove, id: 3, reason: "learner without progress for 1h0m0s",
		},
		{
			name: "unstarted voter sharing one peer URL is matched and updated",
			desired: []spec.Member{
				{Name: "node1", PeerURLs: []string{peerURL("node1")}},
				{Name: "node2", PeerURLs: []string{peerURL("node2"), "https://10.0.0.2:2380"}},
			},
			obs:  observed(1, mem(1, "node1"), mem(2, "node2", unstarted(time.Minute))),
			kind: StepUpdatePeerURLs, id: 2, urls: []string{peerURL("node2"), "https://10.0.0.2:2380"},
			reason: "update peer URLs of node2: [https://node2:2380] -> [https://node2:2380,https://10.0.0.2:2380]",
		},
		{
			name: "peer URL update comes before removing a healthy extra", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, map[int][]memberMod{2: {peers("https://10.0.0.2:2380")}}), mem(9, "old9"))...),
			kind: StepUpdatePeerURLs, id: 2, reason: "update peer URLs of node2: [https://10.0.0.2:2380] -> [https://node2:2380]",
		},
		{
			name: "dead extra goes before a peer URL update", desired: specNodes(3),
			obs:  observed(1, with(nodes(3, map[int][]memberMod{2: {peers("https://10.0.0.2:2380")}}), mem(9, "old9", down))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy",
		},
		{
			name: "a blocked removal does not hold back a peer URL update", desired: specNodes(3),
			obs: observed(1, mem(1, "node1"), mem(2, "node2", peers("https://10.0.0.2:2380")),
				mem(3, "node3", down), mem(8, "old8", down), mem(9, "old9", down)),
			kind: StepUpdatePeerURLs, id: 2, reason: "update peer URLs of node2: [https://10.0.0.2:2380] -> [https://node2:2380]",
		},
		{
			name: "a dead extra holding the wanted peer URL goes first", desired: specNodes(3),
			obs: observed(1, with(nodes(3, map[int][]memberMod{2: {peers("https://10.0.0.2:2380")}}),
				mem(9, "old9", down, peers(peerURL("node2"))))...),
			kind: StepRemove, id: 9, reason: "remove old9: not in the spec, unhealthy",
		},
		{
			name: "peer URL held by a member that cannot go yet", desired: specOf("node1", "node2"),
			obs: observed(1, mem(1, "node1"), mem(2, "node2", down, peers("https://10.0.0.2:2380")),
				mem(9, "old9", peers(peerURL("node2")))),
			kind: StepWait, reason: "waiting: peer URLs of node2 should be [https://node2:2380], but old9 still holds one of them",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.reason == "" {
				t.Fatal("row without reason: name the part of the reason that only the intended rule gives")
			}
			o := opt
			if tt.opt != nil {
				o = *tt.opt
			}
			got := Plan(tt.desired, tt.obs, o)
			if got.Kind != tt.kind || got.MemberID != tt.id || got.To != tt.to {
				t.Fatalf("Plan = %v member %x to %x (%q), want %v member %x to %x",
					got.Kind, got.MemberID, got.To, got.Reason, tt.kind, tt.id, tt.to)
			}
			if !reasonHas(got.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tt.reason)
			}
			if strings.Contains(got.Reason, "\n") || got.Reason == "" {
				t.Errorf("reason %q is not one line", got.Reason)
			}
			if tt.urls != nil && !reflect.DeepEqual(got.PeerURLs, tt.urls) {
				t.Errorf("PeerURLs = %v, want %v", got.PeerURLs, tt.urls)
			}
			assertOrderFree(t, tt.desired, tt.obs, o, got)
		})
	}
}

// assertOrderFree checks that shuffling the spec and the member list
// leaves the step unchanged.
func assertOrderFree(t *testing.T, desired []spec.Member, obs model.Cluster, opt Options, want Step) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		d := append([]spec.Member(nil), desired...)
		ms := append([]model.Member(nil), obs.Members...)
		r.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
		r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		o := obs
		o.Members = ms
		if got := Plan(d, o, opt); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled input gives %+v, want %+v", got, want)
		}
	}
}

// TestNames pins the names of the enums that logs, metrics and status
// print; out of range prints the number instead of panicking.
func TestNames(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		StepNone: "none", StepWait: "wait", StepRemove: "remove",
		StepUpdatePeerURLs: "update-peer-urls", StepMoveLeader: "move-leader", StepKind(99): "StepKind(99)",
		DiffMissing: "missing", DiffExtra: "extra", DiffPeerURLs: "peer-urls", DiffLearner: "learner",
		DiffUnstarted: "unstarted", DiffUnhealthy: "unhealthy", DiffDuplicate: "duplicate", DiffKind(42): "DiffKind(42)",
		ActWait: "wait", ActStartAsIs: "start", ActStartNew: "start-new", ActRejoin: "rejoin", ActIdle: "idle",
		StartAction(9): "StartAction(9)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%T(%d).String() = %q, want %q", v, v, got, want)
		}
	}
}

func TestDiff(t *testing.T) {
	desired := append(specNodes(6), spec.Member{Name: "node7", PeerURLs: []string{peerURL("node7")}})
	obs := observed(1,
		mem(1, "node1"),
		mem(2, "node2", down),
		mem(3, "node3", peers("https://10.0.0.3:2380")),
		mem(4, "node4", learner(3*time.Minute)),
		mem(5, "node5", unstarted(90*time.Second)),
		// node6 missing
		mem(7, "node7", learner(0), down, peers("https://10.0.0.7:2380"), func(m *model.Member) { m.PendingSince = time.Time{} }),
		mem(0x99, "old9", down),
		mem(0x98, "stray", unstarted(time.Minute)),
		mem(0x21, "node1", learner(time.Minute), peers("https://10.0.0.1:2380")),
	)
	want := []string{
		"duplicate node1: registered 2 times (1, 21); its agent removes the stale entry",
		"peer-urls node1 (21): peer URLs [https://10.0.0.1:2380], spec says [https://node1:2380]",
		"learner node1 (21): learner, not promoted yet for 1m0s",
		"unhealthy node2 (2): did not answer its status call",
		"peer-urls node3 (3): peer URLs [https://10.0.0.3:2380], spec says [https://node3:2380]",
		"learner node4 (4): learner, not promoted yet for 3m0s",
		"unstarted node5 (5): added but never started for 1m30s",
		"missing node6: not in the cluster; its agent registers it as a learner",
		"peer-urls node7 (7): peer URLs [https://10.0.0.7:2380], spec says [https://node7:2380]",
		"learner node7 (7): learner, not promoted yet",
		"unhealthy node7 (7): did not answer its status call",
		"extra old9 (99): not in the spec (voter, unhealthy); removed when safe",
		"extra unstarted member 98 (98): not in the spec (voter, unstarted); removed when safe",
	}
	check := func(obs model.Cluster) {
		t.Helper()
		var got []string
		for _, l := range Diff(desired, obs) {
			got = append(got, l.String())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check(obs)
	// Same lines whatever the member order.
	ms := obs.Members
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	check(obs)
}

func TestDiffEmptyWhenConverged(t *testing.T) {
	if d := Diff(specNodes(5), observed(1, nodes(5, nil)...)); len(d) != 0 {
		t.Errorf("Diff = %v, want none", d)
	}
}
