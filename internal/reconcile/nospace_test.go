package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// quota gives a member a db file of size MiB with inUse MiB in use and a
// quota of q MiB.
func quota(size, inUse, q int64) memberMod {
	return func(m *model.Member) { m.DBSize, m.DBSizeInUse, m.Quota = size*mib, inUse*mib, q*mib }
}

// noSpaceOn raises NOSPACE on the given members.
func noSpaceOn(c model.Cluster, ids ...uint64) model.Cluster {
	for _, id := range ids {
		c.Alarms = append(c.Alarms, model.Alarm{MemberID: id, Type: model.AlarmNoSpace})
	}
	return c
}

func TestPlanNoSpace(t *testing.T) {
	full, freed, fits := quota(16, 15, 16), quota(16, 2, 16), quota(3, 2, 16)
	all := func(m memberMod) map[int][]memberMod { return map[int][]memberMod{1: {m}, 2: {m}, 3: {m}} }
	compacting := NoSpacePolicy{Compact: true}
	now := time.Unix(1_000_000_000, 0)
	// everyone stands for every member defragmented a minute ago, when its
	// db file measured what it measures now (filled in below from obs);
	// stale is the same ten minutes and more ago.
	none, everyone := map[uint64]model.DefragMark{}, map[uint64]model.DefragMark{0: {}}
	stale := map[uint64]model.DefragMark{}
	for id := uint64(1); id <= 3; id++ {
		stale[id] = model.DefragMark{InUse: 15 * mib, Size: 16 * mib, At: now.Add(-NoSpaceRemeasure)}
	}
	tests := []struct {
		name           string
		obs            model.Cluster
		rev, compacted int64
		defragged      map[uint64]model.DefragMark
		pol            NoSpacePolicy
		kind           StepKind
		member         uint64
		contains       string
	}{
		{"no alarm, room left", observed(1, nodes(3, all(fits))...), 50, 0, none, compacting, StepNone, 0, "no NOSPACE alarm"},
		{"no alarm, a db at its quota: compact", observed(1, nodes(3, map[int][]memberMod{2: {quota(16, 2, 16)}})...), 50, 0, none, compacting, StepCompact, 0, "compact to revision 50"},
		{"raised: compact first", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 50, 0, none, compacting, StepCompact, 0, "compact to revision 50: NOSPACE is raised"},
		{"compacted: the followers first", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 50, 50, none, compacting, StepDefrag, 2, "defragment node2: 14.0 MiB of 16.0 MiB free (NOSPACE: 16.0 MiB of a 16.0 MiB quota)"},
		{"compaction off: straight to the defragmentation", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 50, 0, none, NoSpacePolicy{}, StepDefrag, 2, "defragment node2"},
		{"deletes moved the revision on: compact again", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 80, 50, none, compacting, StepCompact, 0, "compact to revision 80"},
		{"the leader last: handed off", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {freed}, 2: {fits}, 3: {fits}})...), 1), 50, 50, none, compacting, StepMoveLeader, 1, "move leader from node1 to node"},
		{"every member below the line: disarm", noSpaceOn(observed(1, nodes(3, all(fits))...), 1, 2), 50, 50, none, compacting, StepDisarm, 0, "disarm NOSPACE: every member's db file is below 90% of its quota"},
		{"no alarm, below the line again: done", observed(1, nodes(3, all(fits))...), 50, 50, none, compacting, StepNone, 0, "no NOSPACE alarm"},
		{"just below 90 % disarms", noSpaceOn(observed(1, nodes(3, all(quota(14, 14, 16)))...), 1), 50, 50, none, compacting, StepDisarm, 0, "disarm"},
		{"the data fills the quota: refused", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 50, everyone, compacting, StepFull, 0,
			"data in use 15.0 MiB of a 16.0 MiB quota on node1: raise etcd quota-backend-bytes or delete data"},
		// A defragmentation leaves a few free pages: a db file just over
		// the line with its data just under it is as full as it gets.
		{"defragmented, the file over the line by its last free pages: refused", noSpaceOn(observed(1, nodes(3, all(func(m *model.Member) {
			m.Quota = 16 * mib
			m.DBSize, m.DBSizeInUse = m.Quota*9/10+8192, m.Quota*9/10-8192
		}))...), 1), 50, 50, everyone, compacting, StepFull, 0, "raise etcd quota-backend-bytes or delete data"},
		{"in use as etcd counts it before a defragmentation: defragment first (its figure lags)", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 50, none, compacting, StepDefrag, 2, "defragment node2"},
		// A lease that expired moves the revision on and frees next to
		// nothing: the members are not defragmented again for it
		// (Kubernetes' event leases expire all the time).
		{"the revision moved, etcd's figure shows nothing freed: still full, not defragmented again", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 80, 80, everyone, compacting, StepFull, 0,
			"data in use 15.0 MiB of a 16.0 MiB quota on node1"},
		{"deletes and the compaction freed space since the defragmentation: again", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 80, 80,
			map[uint64]model.DefragMark{1: {InUse: 15 * mib, Size: 16 * mib, At: now}, 2: {InUse: 15 * mib, Size: 16 * mib, At: now}, 3: {InUse: 15 * mib, Size: 16 * mib, At: now}}, compacting, StepDefrag, 2, "defragment node2"},
		// Measured: after a physical compaction only the member that served
		// it reports its data in use afresh; the others' figures lag high.
		{"one member's figure shows the deletes, the others' lag: every member measured again", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {full}, 2: {freed}, 3: {full}})...), 1), 80, 80,
			map[uint64]model.DefragMark{1: {InUse: 15 * mib, Size: 16 * mib, At: now}, 2: {InUse: 15 * mib, Size: 16 * mib, At: now}, 3: {InUse: 15 * mib, Size: 16 * mib, At: now}}, compacting, StepDefrag, 2, "defragment node2"},
		// Near the line the members' layouts differ by a few per cent: a
		// figure that was below the line when the member was measured is
		// no news, and does not measure it again and again.
		{"one member's figure below the line already at the measure: full, not measured again", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {full}, 2: {quota(16, 14, 16)}, 3: {full}})...), 1), 80, 80,
			map[uint64]model.DefragMark{1: {InUse: 15 * mib, Size: 16 * mib, At: now, Below: true}, 2: {InUse: 14 * mib, Size: 16 * mib, At: now, Below: true}, 3: {InUse: 15 * mib, Size: 16 * mib, At: now, Below: true}}, compacting, StepFull, 0, "data in use 15.0 MiB of a 16.0 MiB quota"},
		{"no memory, a minute on, one member's figure below the line: not full (the others' lag)", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {full}, 2: {freed}, 3: {full}})...), 1), 50, 50, nil,
			NoSpacePolicy{Compact: true, RaisedFor: NoSpaceSettle}, StepDefrag, 0, "defragment node"},
		{"compaction off, one by hand freed space since: defragment", noSpaceOn(observed(1, nodes(3, all(freed))...), 1), 50, 0,
			map[uint64]model.DefragMark{1: {InUse: 15 * mib, Size: 16 * mib, At: now}, 2: {InUse: 15 * mib, Size: 16 * mib, At: now}, 3: {InUse: 15 * mib, Size: 16 * mib, At: now}}, NoSpacePolicy{}, StepDefrag, 2, "defragment node2"},
		{"compaction off, the data fills the quota: says to compact too", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 0, everyone, NoSpacePolicy{}, StepFull, 0,
			"raise etcd quota-backend-bytes, delete data, or compact (maintenance.nospace.compact is false: the agents do not)"},
		// A measure from before this NOSPACE (a defragmentation, then the
		// file filled up again) says nothing of it.
		{"a measure the file outgrew since: measured again", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 80, 80,
			map[uint64]model.DefragMark{1: {InUse: 4 * mib, Size: 4 * mib, At: now}, 2: {InUse: 4 * mib, Size: 4 * mib, At: now}, 3: {InUse: 4 * mib, Size: 4 * mib, At: now}}, compacting, StepDefrag, 2, "defragment node2"},
		{"measured ten minutes ago: measured again", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 80, 80, stale, compacting, StepDefrag, 2, "defragment node2"},
		{"no memory (status, the other agents): nearly nothing free counts as defragmented", noSpaceOn(observed(1, nodes(3, all(quota(16, 16, 16)))...), 1), 50, 50, nil, compacting, StepFull, 0, "data in use 16.0 MiB of a 16.0 MiB quota"},
		// A compaction after the measure (a delete moved the revision on)
		// frees pages without a defragmentation: the others judge by the
		// data in use once the actor had its time.
		{"no memory, NOSPACE raised a minute ago, the data at the line: full", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 50, nil,
			NoSpacePolicy{Compact: true, RaisedFor: NoSpaceSettle}, StepFull, 0, "data in use 15.0 MiB of a 16.0 MiB quota"},
		{"no memory, NOSPACE just raised, the data at the line: the actor measures first", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 50, nil,
			NoSpacePolicy{Compact: true, RaisedFor: NoSpaceSettle - time.Second}, StepDefrag, 2, "defragment node2"},
		{"the data fills the quota before compaction: compact first", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 0, none, compacting, StepCompact, 0, "compact"},
		{"the data fills the quota, a raise in the spec: wait for the restarts", noSpaceOn(observed(1, nodes(3, all(full))...), 1), 50, 50,
			everyone, NoSpacePolicy{Compact: true, Quotas: map[string]int64{"node1": 64 * mib, "node2": 64 * mib, "node3": 64 * mib}}, StepWait, 0, "the spec raises quota-backend-bytes to 64.0 MiB"},
		{"raised quota applied: disarm", noSpaceOn(observed(1, nodes(3, all(quota(16, 15, 64)))...), 1), 50, 50,
			everyone, NoSpacePolicy{Compact: true, Quotas: map[string]int64{"node1": 64 * mib, "node2": 64 * mib, "node3": 64 * mib}}, StepDisarm, 0, "disarm"},
		{"a member down: no disarm on a size unknown", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {fits}, 2: {fits}, 3: {down}})...), 1), 50, 50, none, compacting, StepWait, 0,
			"NOSPACE procedure waits: node3 does not answer"},
		{"a member lags: its defragmentation waits", noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {fits}, 2: {freed, lagging}, 3: {fits}})...), 1), 50, 50, none, compacting, StepWait, 0,
			"defrag node2 waits: node2 is catching up"},
		{"a CORRUPT alarm beside it: no step", withAlarms(observed(1, nodes(3, all(freed))...), model.Alarm{MemberID: 1, Type: model.AlarmNoSpace}, model.Alarm{MemberID: 2, Type: model.AlarmCorrupt}), 50, 0, none, compacting, StepWait, 0,
			"a CORRUPT alarm is raised on member 2"},
		{"no leader", noSpaceOn(observed(0, nodes(3, all(freed))...), 1), 50, 0, none, compacting, StepWait, 0, "no leader"},
		{"two members: the follower all the same (writes are refused already)", noSpaceOn(observed(1, nodes(2, all(freed))...), 1), 50, 50, none, compacting, StepDefrag, 2, "defragment node2"},
		{"one member: defragmented in place", noSpaceOn(observed(1, nodes(1, all(freed))...), 1), 50, 50, none, compacting, StepDefrag, 1, "defragment node1 in place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := specNodes(len(tt.obs.Members))
			marks := tt.defragged
			if _, ok := marks[0]; ok {
				marks = map[uint64]model.DefragMark{}
				for _, m := range tt.obs.Members {
					marks[m.ID] = model.DefragMark{InUse: m.DBSizeInUse, Size: m.DBSize, At: now.Add(-time.Minute)}
				}
			}
			got := PlanNoSpace(desired, tt.obs, tt.rev, tt.compacted, marks, tt.pol, now)
			if got.Kind != tt.kind || (tt.member != 0 && got.MemberID != tt.member) || !reasonHas(got.Reason, tt.contains) {
				t.Errorf("got %s member %x: %q\nwant %s member %x containing %q", got.Kind, got.MemberID, got.Reason, tt.kind, tt.member, tt.contains)
			}
			if got.Kind == StepCompact && got.Revision != tt.rev {
				t.Errorf("compacts to %d, want %d", got.Revision, tt.rev)
			}
			if got.Kind == StepDisarm && len(got.Alarms) != len(tt.obs.Alarms) {
				t.Errorf("disarms %v, want %v", got.Alarms, tt.obs.Alarms)
			}
		})
	}
}

// TestDecideNoSpace: the NOSPACE procedure's steps are taken by the
// leader's agent alone, without the cluster lock (etcd refuses its lease
// under NOSPACE), ahead of a membership change; the others wait and say
// who acts; a member under NOSPACE alone is never stopped for repair.
func TestDecideNoSpace(t *testing.T) {
	freed, fits, full := quota(16, 2, 16), quota(3, 2, 16), quota(16, 16, 16)
	all := func(m memberMod) map[int][]memberMod { return map[int][]memberMod{1: {m}, 2: {m}, 3: {m}} }
	pol := NoSpacePolicy{Compact: true}
	type agentPass struct {
		l model.Local
		m model.Memory
	}
	local := func(self uint64, compacted int64) agentPass {
		return agentPass{l: model.Local{Running: true, Answer: &model.Answer{MemberID: self, Leader: 1, Revision: 50,
			Alarms: []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}}}, m: model.Memory{Compacted: compacted}}
	}
	records := func(ids ...uint64) []model.AgentRecord {
		var out []model.AgentRecord
		for _, id := range ids {
			out = append(out, model.AgentRecord{Name: "node" + string(rune('0'+id)), MemberID: id})
		}
		return out
	}
	tests := []struct {
		name     string
		desired  []spec.Member
		obs      model.Cluster
		local    agentPass
		agents   []model.AgentRecord
		kind     ActionKind
		key      string
		contains string
	}{
		{"the leader's agent compacts, unlocked", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(1, 0), nil, DoCompact, "nospace/compact/0", "compact to revision 50"},
		{"a follower's agent waits and names the actor", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(2, 0), nil, DoWait, "nospace-other/nospace/defrag/2", "the agent of node1 (the leader) takes"},
		{"the leader's agent defragments a follower", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(1, 50), nil, DoDefrag, "nospace/defrag/2", "defragment node2"},
		{"the leader's agent hands its leadership off", specNodes(3), noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {freed}, 2: {fits}, 3: {fits}})...), 1), local(1, 50), nil, DoChangeMembership, "nospace/move-leader/1", "move-leader node1"},
		{"the leader's agent disarms", specNodes(3), noSpaceOn(observed(1, nodes(3, all(fits))...), 1), local(1, 50), nil, DoDisarm, "nospace/disarm/0", "NOSPACE: disarm: every member"},
		{"the data fills the quota: every agent says so", specNodes(3), noSpaceOn(observed(1, nodes(3, all(full))...), 1), local(2, 50), nil, DoWait, "nospace-full/data in use # MiB of a # MiB quota on node#: raise etcd quota-backend-bytes or delete data (NOSPACE stays raised: disarming would only trip again)", "raise etcd quota-backend-bytes or delete data"},
		{"before a membership change that needs the lock", specNodes(2), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(1, 0), records(1, 2, 3), DoCompact, "nospace/compact/0", "compact"},
		{"the leader's agent is gone: the lowest live one acts", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(2, 0), records(2, 3), DoCompact, "nospace/compact/0", "compact"},
		{"the leader's agent is gone: the others wait for it", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(3, 0), records(2, 3), DoWait, "nospace-other/nospace/defrag/2", "the agent of node2 (the lowest healthy voter with a live agent"},
		{"the leader's agent is alive: it acts", specNodes(3), noSpaceOn(observed(1, nodes(3, all(freed))...), 1), local(2, 0), records(1, 2, 3), DoWait, "nospace-other/nospace/defrag/2", "node1 (the leader)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			in := Input{Self: tt.desired[tt.local.l.Answer.MemberID-1], InSpec: true, Desired: tt.desired, Local: tt.local.l, Memory: tt.local.m, Cluster: &obs, NoSpace: pol, Agents: tt.agents}
			got := Decide(in)
			if got.Kind != tt.kind || got.Key != tt.key || !strings.Contains(got.Reason, tt.contains) {
				t.Errorf("got %s %q (%s)\nwant %s %q containing %q", got.Kind, got.Key, got.Reason, tt.kind, tt.key, tt.contains)
			}
			if got.Kind != DoWait && !got.Unlocked {
				t.Errorf("%s would need the cluster lock, which etcd refuses under NOSPACE", got.Kind)
			}
			if got.Kind == DoStopForRepair || got.Kind == DoStopStuck {
				t.Errorf("stopped a member under NOSPACE: %s", got.Reason)
			}
		})
	}
}

// TestNoSpaceIsNoRepair: a member whose own status lists NOSPACE (naming
// it) is a healthy voter: it is not stopped for repair, whether the
// procedure can cure it or not.
func TestNoSpaceIsNoRepair(t *testing.T) {
	for _, size := range []memberMod{quota(16, 2, 16), quota(16, 16, 16)} {
		obs := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {size}, 2: {size}, 3: {size}})...), 1, 2, 3)
		for self := uint64(1); self <= 3; self++ {
			in := Input{Self: specNodes(3)[self-1], InSpec: true, Desired: specNodes(3), Cluster: &obs, NoSpace: NoSpacePolicy{Compact: true},
				Local: model.Local{Running: true, Answer: &model.Answer{MemberID: self, Leader: 1, Revision: 50, Alarms: obs.Alarms}}, Memory: model.Memory{Compacted: 50}}
			if got := Decide(in); got.Kind == DoStopForRepair || got.Kind == DoStopStuck || got.Kind == DoRejoin {
				t.Errorf("member %d under NOSPACE: %s (%s)", self, got.Kind, got.Reason)
			}
		}
	}
}

// quotaRaiseGranted is the turn (quotaRaiseTurn) and the budget's grant
// of member self's restart for a raised quota under NOSPACE.
func quotaRaiseGranted(obs model.Cluster, self uint64, pol NoSpacePolicy) (bool, string) {
	in := Input{Desired: specNodes(len(obs.Members)), Cluster: &obs, NoSpace: pol, Local: model.Local{Answer: &model.Answer{MemberID: self}}}
	q, why := quotaRaiseTurn(in)
	if q == nil {
		return false, why
	}
	if g := budgetOf(in).grant(Request{Member: self, Kind: DisruptRestart, Why: why}, *q, true); !g.Granted() {
		return false, g.Wait
	}
	return true, why
}

// TestQuotaRaiseTurn: under NOSPACE a raised quota restarts the members
// one at a time without the lock: followers by member ID, the leader
// last, only while every other voter answers.
func TestQuotaRaiseTurn(t *testing.T) {
	raised := NoSpacePolicy{Compact: true, Quotas: map[string]int64{"node1": 64 * mib, "node2": 64 * mib, "node3": 64 * mib}}
	old, applied := quota(16, 16, 16), quota(16, 16, 64)
	tests := []struct {
		name     string
		obs      model.Cluster
		self     uint64
		pol      NoSpacePolicy
		turn     bool
		contains string
	}{
		{"the first follower goes first", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 2, raised, true, "raised to 64.0 MiB under NOSPACE"},
		{"the next follower waits its turn", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 3, raised, false, "node2 restarts first"},
		{"the leader waits for the followers", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 1, raised, false, "node2 restarts first"},
		{"node2 restarted: node3's turn", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {applied}, 3: {old}})...), 3, raised, true, "restarting"},
		{"the leader last", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {applied}, 3: {applied}})...), 1, raised, true, "restarting"},
		{"not while the one before is still down", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {applied, down}, 3: {old}})...), 3, raised, false, "node2 is not a healthy voter"},
		{"no raise: other settings wait", observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 2, NoSpacePolicy{Compact: true}, false, "only a raise of quota-backend-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn, why := quotaRaiseGranted(tt.obs, tt.self, tt.pol)
			if turn != tt.turn || !strings.Contains(why, tt.contains) {
				t.Errorf("got %v %q, want %v containing %q", turn, why, tt.turn, tt.contains)
			}
		})
	}
	// Through Decide: the member whose turn it is restarts, unlocked.
	obs := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 1)
	in := Input{Self: specNodes(3)[1], InSpec: true, Desired: specNodes(3), Cluster: &obs, NoSpace: raised,
		Local: model.Local{Running: true, Restart: model.Restart{Why: "changed settings"}, Answer: &model.Answer{MemberID: 2, Leader: 1, Revision: 50}}, Memory: model.Memory{Compacted: 50}}
	if got := Decide(in); got.Kind != DoRestart || !got.Unlocked {
		t.Errorf("node2 with a raised quota under NOSPACE: %s %v (%s), want an unlocked restart", got.Kind, got.Unlocked, got.Reason)
	}
	in.Self, in.Local.Answer.MemberID = specNodes(3)[2], 3
	if got := Decide(in); got.Kind != DoWait || !strings.Contains(got.Reason, "the spec raises quota-backend-bytes") {
		t.Errorf("node3 before its turn: %s (%s), want the NOSPACE wait for the restarts", got.Kind, got.Reason)
	}
	// The leader's turn: it hands its leadership off first, unlocked
	// (MoveLeader is not refused under NOSPACE), rather than cost an
	// election by restarting in place; with no one to take over, in place.
	last := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {applied}, 3: {applied}})...), 1)
	in = Input{Self: specNodes(3)[0], InSpec: true, Desired: specNodes(3), Cluster: &last, NoSpace: raised,
		Local: model.Local{Running: true, Restart: model.Restart{Why: "changed settings"}, Answer: &model.Answer{MemberID: 1, Leader: 1, Revision: 50}}, Memory: model.Memory{Compacted: 50}}
	if got := Decide(in); got.Kind != DoChangeMembership || got.Step.Kind != StepMoveLeader || !got.Unlocked {
		t.Errorf("the leader's turn under NOSPACE: %s %s %v (%s), want an unlocked leader move first", got.Kind, got.Step.Kind, got.Unlocked, got.Reason)
	}
	// A restart due for a raised quota that would also move the member to
	// another etcd or agent binary is an upgrade: not without the lock,
	// etcd's preflight and the rollout's snapshot (the docs: the other
	// changes wait until the alarm is cleared).
	first := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 1)
	for _, r := range []model.Restart{
		{Why: "changed settings; etcd 3.6.16 → 3.7.3", EtcdFrom: "3.6.16", EtcdTo: "3.7.3"},
		{Why: "changed settings; etcdkeeper 1.4.0 → 1.5.0", Agent: true},
	} {
		up := Input{Self: specNodes(3)[1], InSpec: true, Desired: specNodes(3), Cluster: &first, NoSpace: raised,
			Local: model.Local{Running: true, Restart: r, Answer: &model.Answer{MemberID: 2, Leader: 1, Revision: 50}}, Memory: model.Memory{Compacted: 50}}
		if got := Decide(up); got.Kind == DoRestart || got.Kind == DoChangeMembership {
			t.Errorf("a raised quota with %q under NOSPACE: %s (%s), want a wait (no unlocked upgrade)", r.Why, got.Kind, got.Reason)
		}
		up.Self, up.Cluster, up.Local.Answer.MemberID = specNodes(3)[0], &last, 1
		if got := Decide(up); got.Kind == DoRestart || got.Kind == DoChangeMembership {
			t.Errorf("the leader's turn with %q under NOSPACE: %s (%s), want a wait (no unlocked upgrade)", r.Why, got.Kind, got.Reason)
		}
	}
	alone := noSpaceOn(observed(1, nodes(1, map[int][]memberMod{1: {old}})...), 1)
	in.Desired, in.Cluster = specNodes(1), &alone
	if got := Decide(in); got.Kind != DoRestart || !got.Unlocked {
		t.Errorf("a lone member's turn under NOSPACE: %s (%s), want an unlocked restart in place", got.Kind, got.Reason)
	}
}

// TestFollowerSaysDataFillsQuota: a follower's agent never compacts
// (the leader's does), so its Local.Compacted stays 0. When the data
// fills the quota it must say so, like the leader's agent, not "the agent
// of node1 takes the procedure's steps (next: compact to revision 50 ...)"
// for as long as NOSPACE lasts (what its /status, STATUS and log show).
func TestFollowerSaysDataFillsQuota(t *testing.T) {
	full := quota(16, 16, 16)
	obs := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {full}, 2: {full}, 3: {full}})...), 1)
	desired := specNodes(3)
	local := model.Local{Running: true, Answer: &model.Answer{MemberID: 2, Leader: 1, Revision: 50,
		Alarms: []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}}}
	in := Input{Self: desired[1], InSpec: true, Desired: desired, Local: local, Cluster: &obs, NoSpace: NoSpacePolicy{Compact: true}}
	got := Decide(in)
	if !strings.HasPrefix(got.Key, "nospace-full/") || !strings.Contains(got.Reason, "raise etcd quota-backend-bytes or delete data") {
		t.Errorf("a follower's agent under a full quota says %q (%s), want the data-fills-the-quota message", got.Reason, got.Key)
	}
}

// TestNothingToFreeIsNotDue: maintenance.defrag.minFreeRatio: 0
// with minFreeBytes: 0 is a valid spec; a member with nothing to free
// must not be due (seen live: 22 defragmentations freeing 0 B in 30 s,
// one every pass, each stalling that member).
func TestNothingToFreeIsNotDue(t *testing.T) {
	packed := db(16, 16)
	obs := observed(1, nodes(3, map[int][]memberMod{1: {packed}, 2: {packed}, 3: {packed}})...)
	got := PlanMaintenance(specNodes(3), obs, nil, DefragPolicy{Enabled: true, MinFreeRatio: 0, MinFreeBytes: 0})
	if got.Kind != StepNone {
		t.Errorf("with nothing free: %s %q, want none", got.Kind, got.Reason)
	}
}

// TestNoSpaceRestartsNeverOverlap is G3 (safety review 2026-12-03): under
// NOSPACE an agent that took the cluster lock before the alarm and one
// whose turn it is to restart for a raised quota must not restart in the
// same pass. The unlocked one waits while the lock is held elsewhere, and
// the holder restarts only for the quota raise (anything else gives the
// lock back to the NOSPACE procedure).
func TestNoSpaceRestartsNeverOverlap(t *testing.T) {
	raised := NoSpacePolicy{Compact: true, Quotas: map[string]int64{"node1": 64 * mib, "node2": 64 * mib, "node3": 64 * mib}}
	old := quota(16, 16, 16)
	obs := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {old}, 2: {old}, 3: {old}})...), 1)
	pass := func(self uint64, local model.Local, pol NoSpacePolicy) Action {
		local.Running = true
		local.Answer = &model.Answer{MemberID: self, Leader: 1, Revision: 50}
		return Decide(Input{Self: specNodes(3)[self-1], InSpec: true, Desired: specNodes(3), Cluster: &obs, NoSpace: pol, Generation: "g1",
			Local: local, Memory: model.Memory{Compacted: 50, RolloutSnapshot: "g1: changed settings"}, Agents: []model.AgentRecord{{Name: "node1", Generation: "g1", MemberID: 1}, {Name: "node2", Generation: "g1", MemberID: 2}, {Name: "node3", Generation: "g1", MemberID: 3}}})
	}
	// node2's turn for the quota raise, while node3 holds the lock.
	if got := pass(2, model.Local{Restart: model.Restart{Why: "changed settings"}, LockHeldElsewhere: true}, raised); got.Kind == DoRestart || got.Kind == DoChangeMembership {
		t.Errorf("node2's unlocked quota-raise restart beside a lock holder: %s (%s)", got.Kind, got.Reason)
	}
	// node3 holds the lock for a restart that is not the quota raise.
	settings := pass(3, model.Local{Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, NoSpacePolicy{Compact: true})
	if settings.Kind == DoRestart || !settings.ReleaseLock {
		t.Errorf("the lock holder's rolling restart under NOSPACE: %s (%s), release %v; want it to give the lock back", settings.Kind, settings.Reason, settings.ReleaseLock)
	}
	// The holder's own quota raise goes on under its lock, and the
	// unlocked node2 waits for it: one restart at a time.
	if got := pass(3, model.Local{Restart: model.Restart{Why: "changed settings"}, LockHeld: true}, raised); got.Kind != DoRestart || got.Unlocked {
		t.Errorf("the lock holder's quota-raise restart: %s unlocked %v (%s), want a restart under its lock", got.Kind, got.Unlocked, got.Reason)
	}
	// Once the lock is free, node2 restarts, unlocked.
	if got := pass(2, model.Local{Restart: model.Restart{Why: "changed settings"}}, raised); got.Kind != DoRestart || !got.Unlocked {
		t.Errorf("node2's turn with the lock free: %s (%s), want the unlocked restart", got.Kind, got.Reason)
	}
}

// TestNoSpaceSeen: NOSPACE is cleared only by an observation that could
// have seen it.
func TestNoSpaceSeen(t *testing.T) {
	alarm := []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}
	raised := model.Cluster{LeaderID: 1, Alarms: alarm, Members: []model.Member{{ID: 1, Name: "a"}}}
	clear := model.Cluster{LeaderID: 1, Members: []model.Member{{ID: 1, Name: "a"}}}
	silent := model.Cluster{Members: []model.Member{{ID: 1, Name: "a", Err: "deadline"}}}
	tests := []struct {
		name          string
		c             *model.Cluster
		local         *model.Answer
		was           bool
		raised, known bool
	}{
		{"a member answers with it", &raised, nil, false, true, true},
		{"a member answers without it", &clear, nil, true, false, true},
		{"nobody answered, the local member lists it", &silent, &model.Answer{MemberID: 1, Alarms: alarm}, false, true, true},
		{"nobody answered, it was raised", &silent, &model.Answer{MemberID: 1}, true, true, true},
		{"nobody answered, it was not", &silent, &model.Answer{MemberID: 1}, false, false, true},
		{"nothing observed: what it was", nil, nil, true, true, false},
	}
	for _, tt := range tests {
		if raised, known := NoSpaceSeen(tt.c, tt.local, tt.was); raised != tt.raised || known != tt.known {
			t.Errorf("%s: NoSpaceSeen = %v %v, want %v %v", tt.name, raised, known, tt.raised, tt.known)
		}
	}
}
