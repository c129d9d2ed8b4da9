package reconcile

import (
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// records are live agent records of members ids, each able to
// defragment its member offline.
func records(ids ...uint64) []model.AgentRecord {
	var out []model.AgentRecord
	for _, id := range ids {
		out = append(out, model.AgentRecord{Name: specNodes(int(id))[id-1].Name, MemberID: id, DefragOffline: true})
	}
	return out
}

// TestDefragWay: which way the maintenance rule defragments a member,
// and why online when offline cannot be done.
func TestDefragWay(t *testing.T) {
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Offline: true}
	frag := db(100, 20)
	older := []model.AgentRecord{{Name: "node1", MemberID: 1, DefragOffline: true}, {Name: "node2", MemberID: 2}, {Name: "node3", MemberID: 3, DefragOffline: true}}
	tests := []struct {
		name     string
		obs      model.Cluster
		agents   []model.AgentRecord
		pol      DefragPolicy
		kind     StepKind
		member   uint64
		contains string
	}{
		{"a follower whose agent runs: offline", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), records(1, 2, 3), on,
			StepDefragOffline, 2, "defragment node2 offline: 80.0 MiB of 100.0 MiB free (its agent stops etcd, rewrites the db, starts it)"},
		{"its agent does not run: online", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), records(1, 3), on,
			StepDefrag, 2, "defragment node2: 80.0 MiB of 100.0 MiB free; online: node2's agent does not run"},
		{"its agent cannot (older, or its last offline one failed): online", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), older, on,
			StepDefrag, 2, "online: agent node2 does not defragment offline"},
		{"the records are not read: online", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), nil, on,
			StepDefrag, 2, "online: the agents' records are not read"},
		{"the spec says offline: false", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), records(1, 2, 3), DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib},
			StepDefrag, 2, "defragment node2: 80.0 MiB of 100.0 MiB free"},
		{"the leader: handed off first, whatever the way", observed(1, nodes(3, map[int][]memberMod{1: {frag}})...), records(1, 2, 3), on,
			StepMoveLeader, 1, "node1 is due for defragmentation"},
		{"a former leader, now a follower: offline", observed(2, nodes(3, map[int][]memberMod{1: {frag}})...), records(1, 2, 3), on,
			StepDefragOffline, 1, "defragment node1 offline"},
		{"the same budget: a member down holds it", observed(1, nodes(3, map[int][]memberMod{2: {frag}, 3: {down}})...), records(1, 2, 3), on,
			StepWait, 0, "defrag node2 waits: node3 is not a healthy voter"},
		{"the same budget: a lagging member waits", observed(1, nodes(3, map[int][]memberMod{2: {frag, lagging}})...), records(1, 2, 3), on,
			StepWait, 0, "node2 is catching up"},
		{"one member: never (not under NOSPACE)", observed(1, nodes(1, map[int][]memberMod{1: {frag}})...), records(1), on,
			StepWait, 0, "defrag node1 waits"},
		// A member stopped for its offline defragmentation answers no
		// status: that none is due is not known, and a request that has
		// not had it defragmented is not done (defrag --yes said done
		// while the last member was still out).
		{"none due while a member is out: not known", observed(1, nodes(3, map[int][]memberMod{3: {down}})...), records(1, 2, 3), on,
			StepWait, 0, "defrag waits: node3 does not answer (its db size is unknown)"},
		{"none due, the member out done already for the request: done", observed(1, nodes(3, map[int][]memberMod{3: {down}})...), records(1, 2, 3),
			DefragPolicy{Now: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Offline: true, Done: map[uint64]bool{3: true}},
			StepNone, 0, "no maintenance due"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := specNodes(len(tt.obs.Members))
			got := planMaintenance(budget{plan: newPlanView(desired, tt.obs), agents: tt.agents}, tt.pol)
			if got.Kind != tt.kind || (tt.member != 0 && got.MemberID != tt.member) || !reasonHas(got.Reason, tt.contains) {
				t.Errorf("got %s %x %q, want %s %x containing %q", got.Kind, got.MemberID, got.Reason, tt.kind, tt.member, tt.contains)
			}
		})
	}
}

// TestDefragWayUnderNoSpace: the NOSPACE procedure defragments online,
// every member, whatever the agents can do: the leader's agent takes its
// steps alone, without the lock, and writes are refused anyway.
func TestDefragWayUnderNoSpace(t *testing.T) {
	for _, n := range []int{1, 3} {
		mods := map[int][]memberMod{}
		for i := 1; i <= n; i++ {
			mods[i] = []memberMod{quota(16, 2, 16)}
		}
		obs := noSpaceOn(observed(1, nodes(n, mods)...), 1)
		self := model.Local{Running: true, Answer: &model.Answer{MemberID: 1, Leader: 1, Revision: 50, Alarms: []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}}}
		in := Input{Self: specNodes(n)[0], InSpec: true, Desired: specNodes(n), Local: self, Cluster: &obs,
			Agents: records(1, 2, 3)[:n], Defrag: DefragPolicy{Offline: true}}
		got := Decide(in)
		if got.Kind != DoDefrag {
			t.Errorf("%d members: got %s (%s), want %s", n, got.Kind, got.Reason, DoDefrag)
		}
	}
}

// TestDecideOfflineDefrag: the offline way is the member's own agent's
// step, under the lock it keeps until the member has caught up; a cut
// short one resumes on a stopped etcd, without the lock.
func TestDecideOfflineDefrag(t *testing.T) {
	frag := db(100, 20)
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Offline: true}
	fragmented := observed(1, nodes(3, map[int][]memberMod{2: {frag}})...)
	rejoined := observed(1, nodes(3, nil)...)
	behind := observed(1, nodes(3, map[int][]memberMod{2: {lagging}})...)
	self := func(id uint64, lock bool) model.Local {
		return model.Local{Running: true, LockHeld: lock, Answer: &model.Answer{MemberID: id, Leader: 1}}
	}
	open := func(l model.Local, step model.OfflineStep) model.Local {
		l.OfflineDefrag = &model.OfflineDefrag{MemberID: 2, Step: step}
		return l
	}
	stopped := func(step model.OfflineStep) model.Local {
		return model.Local{OfflineDefrag: &model.OfflineDefrag{MemberID: 2, Step: step}, Data: model.Data{Kind: model.DataHealthy, MemberID: 2}}
	}
	tests := []struct {
		name    string
		self    uint64
		local   model.Local
		obs     model.Cluster
		kind    ActionKind
		key     string
		release bool
	}{
		{"the lock holder leaves it to the member's agent", 1, self(1, true), fragmented, DoNothing, "maintenance-elsewhere/maintenance/defrag-offline/2", true},
		{"another agent does not take the lock for it", 3, self(3, false), fragmented, DoNothing, "maintenance-elsewhere/maintenance/defrag-offline/2", true},
		{"the member's agent takes the lock", 2, self(2, false), fragmented, DoTakeLock, "lock/maintenance/defrag-offline/2", false},
		{"and defragments its member with it, keeping it", 2, self(2, true), fragmented, DoDefragOffline, "maintenance/defrag-offline/2", false},
		{"rewritten, etcd starts as it is", 2, stopped(model.OfflineRewritten), rejoined, DoStart, "", false},
		{"cut short before the rewrite: rewritten again, then started", 2, stopped(model.OfflineStopped), rejoined, DoResumeOffline, "defrag-offline/resume/stopped", false},
		{"cut short before the stop", 2, stopped(model.OfflineStopping), rejoined, DoResumeOffline, "defrag-offline/resume/stopping", false},
		{"started and catching up: the lock stays", 2, open(self(2, true), model.OfflineRewritten), behind, DoWait, "defrag-offline/returning", false},
		{"caught up: the journal closes, the lock goes back", 2, open(self(2, true), model.OfflineRewritten), rejoined, DoEndOffline, "defrag-offline/end", true},
		{"a stop that failed: etcd runs on, the journal closes", 2, open(self(2, true), model.OfflineStopping), rejoined, DoEndOffline, "defrag-offline/end", true},
		{"caught up after a restart without the lock", 2, open(self(2, false), model.OfflineRewritten), rejoined, DoEndOffline, "defrag-offline/end", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			desired := specNodes(3)
			in := Input{Self: desired[tt.self-1], InSpec: true, Desired: desired, Local: tt.local, Cluster: &obs, Defrag: on, Agents: records(1, 2, 3)}
			got := Decide(in)
			if got.Kind != tt.kind || (tt.key != "" && got.Key != tt.key) || got.ReleaseLock != tt.release {
				t.Errorf("got %s %q release %v (%s), want %s %q release %v", got.Kind, got.Key, got.ReleaseLock, got.Reason, tt.kind, tt.key, tt.release)
			}
		})
	}
}

// TestRequestOfflineDefrag: an operator's defragmentation takes the same
// way; the member's agent acts on it until its member has caught up
// (the command waits while an agent acts), the others say whose step it
// is.
func TestRequestOfflineDefrag(t *testing.T) {
	frag := db(100, 20)
	req := &model.Request{ID: "r1", Kind: model.RequestDefrag, By: "op"}
	fragmented := observed(1, nodes(3, map[int][]memberMod{2: {frag}})...)
	behind := observed(1, nodes(3, map[int][]memberMod{2: {lagging}})...)
	tests := []struct {
		name  string
		self  uint64
		local model.Local
		obs   model.Cluster
		kind  ActionKind
		phase model.RequestPhase
	}{
		{"another agent waits for it", 1, model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 1, Leader: 1}}, fragmented, DoNothing, model.RequestWaiting},
		{"its agent acts", 2, model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 2, Leader: 1}}, fragmented, DoDefragOffline, model.RequestActing},
		{"its agent acts while etcd starts", 2, model.Local{OfflineDefrag: &model.OfflineDefrag{MemberID: 2, Step: model.OfflineRewritten, Request: "r1"}, Data: model.Data{Kind: model.DataHealthy, MemberID: 2}},
			observed(1, nodes(3, map[int][]memberMod{2: {down}})...), DoStart, model.RequestActing},
		{"and while it catches up", 2, model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 2, Leader: 1}, OfflineDefrag: &model.OfflineDefrag{MemberID: 2, Step: model.OfflineRewritten, Request: "r1"}},
			behind, DoWait, model.RequestActing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			desired := specNodes(3)
			in := Input{Self: desired[tt.self-1], InSpec: true, Desired: desired, Local: tt.local, Cluster: &obs, Request: req,
				Defrag: DefragPolicy{MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Offline: true}, Agents: records(1, 2, 3)}
			got := Decide(in)
			if got.Kind != tt.kind || got.Request == nil || got.Request.Phase != tt.phase {
				t.Errorf("got %s %+v (%s), want %s %s", got.Kind, got.Request, got.Reason, tt.kind, tt.phase)
			}
		})
	}
}
