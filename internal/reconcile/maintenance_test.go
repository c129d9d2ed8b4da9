package reconcile

import (
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

const mib = 1 << 20

// db gives a member a db file of size MiB with inUse MiB in use.
func db(size, inUse int64) memberMod {
	return func(m *model.Member) { m.DBSize, m.DBSizeInUse, m.Quota = size*mib, inUse*mib, model.DefaultQuota }
}

func window(t *testing.T, w string) spec.Window {
	t.Helper()
	v, err := spec.ParseWindow(w)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPlanMaintenance(t *testing.T) {
	// planNow is Sunday 2025-06-01 12:00 UTC.
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib}
	withPol := func(f func(*DefragPolicy)) DefragPolicy { p := on; f(&p); return p }
	frag := db(100, 20) // 80 MiB of 100 free
	tests := []struct {
		name     string
		obs      model.Cluster
		pol      DefragPolicy
		kind     StepKind
		member   uint64
		to       uint64
		contains string
	}{
		{"nothing fragmented", observed(1, nodes(3, map[int][]memberMod{1: {db(100, 90)}, 2: {db(100, 90)}, 3: {db(100, 90)}})...),
			on, StepNone, 0, 0, "no maintenance due"},
		{"ratio below threshold", observed(1, nodes(3, map[int][]memberMod{2: {db(100, 60)}})...),
			on, StepNone, 0, 0, "no maintenance due"},
		{"bytes below threshold", observed(1, nodes(3, map[int][]memberMod{2: {db(16, 8)}})...),
			on, StepNone, 0, 0, "no maintenance due"},
		{"disabled", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...),
			withPol(func(p *DefragPolicy) { p.Enabled = false }), StepNone, 0, 0, "enabled is false"},
		{"a follower", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...),
			on, StepDefrag, 2, 0, "defragment node2: 80.0 MiB of 100.0 MiB free"},
		{"the one with most to free first", observed(1, nodes(3, map[int][]memberMod{2: {db(100, 40)}, 3: {frag}})...),
			on, StepDefrag, 3, 0, "defragment node3"},
		{"followers before the leader", observed(1, nodes(3, map[int][]memberMod{1: {db(1000, 10)}, 2: {frag}, 3: {frag}})...),
			on, StepDefrag, 2, 0, "defragment node2"},
		{"the leader last: leadership moved first, to the most caught-up voter", observed(1, nodes(3, map[int][]memberMod{1: {frag}, 3: {index(120)}})...),
			on, StepMoveLeader, 1, 3, "move leader from node1 to node3 (applied index 120): node1 is due for defragmentation (80.0 MiB of 100.0 MiB free)"},
		{"the leader's move skips a lagging voter", observed(1, nodes(5, map[int][]memberMod{1: {frag}, 3: {index(120), lagging}})...),
			on, StepMoveLeader, 1, 2, "move leader from node1 to node2"},
		{"the leader waits for a follower that waits", observed(1, nodes(5, map[int][]memberMod{1: {frag}, 2: {frag, lagging}})...),
			on, StepWait, 0, 0, "defrag node2 waits: node2 is catching up"},
		{"a lagging member waits", observed(1, nodes(3, map[int][]memberMod{2: {frag, lagging}})...),
			on, StepWait, 0, 0, "defrag node2 waits: node2 is catching up (index 1200 behind the leader)"},
		{"a lagging member waits, the next goes", observed(1, nodes(5, map[int][]memberMod{2: {db(100, 5), lagging}, 3: {frag}})...),
			on, StepDefrag, 3, 0, "defragment node3"},
		{"no quorum of caught-up voters without it", observed(1, nodes(3, map[int][]memberMod{2: {frag}, 3: {lagging}})...),
			on, StepWait, 0, 0, "defrag node2 waits: without it the others have 1 of 2 voters caught up (quorum 2); node3 is catching up"},
		// Raft's quorum is that of every voter, the one defragmented
		// included: with an even count, a quorum of the others is one short.
		{"four members, one lagging: the two others caught up are no quorum of four", observed(1, nodes(4, map[int][]memberMod{2: {frag}, 3: {lagging}})...),
			on, StepWait, 0, 0, "defrag node2 waits: without it the others have 2 of 3 voters caught up (quorum 3)"},
		{"two members: the leader alone commits nothing", observed(1, nodes(2, map[int][]memberMod{2: {frag}})...),
			on, StepWait, 0, 0, "defrag node2 waits: without it the others have 1 of 1 voters caught up (quorum 2)"},
		{"four members caught up: one goes", observed(1, nodes(4, map[int][]memberMod{2: {frag}})...),
			on, StepDefrag, 2, 0, "defragment node2"},
		{"a member down: its repair first", observed(1, nodes(3, map[int][]memberMod{2: {frag}, 3: {down}})...),
			on, StepWait, 0, 0, "defrag node2 waits: node3 is not a healthy voter"},
		{"a rejoin under way (a learner)", observed(1, with(nodes(2, map[int][]memberMod{2: {frag}}), mem(3, "node3", learner(0)))...),
			on, StepWait, 0, 0, "defrag node2 waits: node3 is a learner"},
		{"a CORRUPT alarm", withAlarms(observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), model.Alarm{MemberID: 3, Type: model.AlarmCorrupt}),
			on, StepWait, 0, 0, "defrag node2 waits: a CORRUPT alarm is raised on member 3"},
		{"NOSPACE does not hold it back", withAlarms(observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), model.Alarm{MemberID: 2, Type: model.AlarmNoSpace}),
			on, StepDefrag, 2, 0, "defragment node2"},
		{"outside the window", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...),
			withPol(func(p *DefragPolicy) { p.Window = window(t, "Sat 02:00-05:00 UTC") }), StepWait, 0, 0, "defrag node2 waits: outside the window Sat 02:00-05:00 UTC"},
		{"inside the window", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...),
			withPol(func(p *DefragPolicy) { p.Window = window(t, "Sun 11:00-13:00 UTC") }), StepDefrag, 2, 0, "defragment node2"},
		{"now: the window and enabled do not apply", observed(1, nodes(3, map[int][]memberMod{2: {frag}})...),
			withPol(func(p *DefragPolicy) { p.Window, p.Enabled, p.Now = window(t, "Sat 02:00-05:00 UTC"), false, true }), StepDefrag, 2, 0, "defragment node2"},
		{"now: the thresholds still do", observed(1, nodes(3, map[int][]memberMod{2: {db(100, 90)}})...),
			withPol(func(p *DefragPolicy) { p.Now = true }), StepNone, 0, 0, "no maintenance due"},
		{"a named member: no thresholds", observed(1, nodes(3, map[int][]memberMod{3: {db(100, 99)}})...),
			withPol(func(p *DefragPolicy) { p.Member, p.Now = "node3", true }), StepDefrag, 3, 0, "defragment node3: 1.0 MiB of 100.0 MiB free, asked for"},
		{"a named leader: moved first", observed(1, nodes(3, nil)...),
			withPol(func(p *DefragPolicy) { p.Member, p.Now = "node1", true }), StepMoveLeader, 1, 2, "move leader from node1 to node2"},
		{"a named member keeps the safety rules", observed(1, nodes(3, map[int][]memberMod{3: {lagging}})...),
			withPol(func(p *DefragPolicy) { p.Member, p.Now = "node3", true }), StepWait, 0, 0, "defrag node3 waits: node3 is catching up"},
		{"a named member that is not there", observed(1, nodes(3, nil)...),
			withPol(func(p *DefragPolicy) { p.Member, p.Now = "node9", true }), StepWait, 0, 0, "no started voter of that name"},
		{"no leader", observed(0, nodes(3, map[int][]memberMod{2: {frag}})...),
			on, StepWait, 0, 0, "defrag waits: no leader"},
		{"one member: nobody to commit while it stalls", observed(1, nodes(1, map[int][]memberMod{1: {frag}})...),
			on, StepWait, 0, 0, "defrag node1 waits: without it the others have 0 of 0 voters caught up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := specNodes(len(tt.obs.Members))
			got := PlanMaintenance(desired, tt.obs, nil, tt.pol)
			if got.Kind != tt.kind || (tt.member != 0 && got.MemberID != tt.member) || got.To != tt.to || !reasonHas(got.Reason, tt.contains) {
				t.Errorf("got %s member %x to %x: %q\nwant %s member %x to %x containing %q", got.Kind, got.MemberID, got.To, got.Reason, tt.kind, tt.member, tt.to, tt.contains)
			}
		})
	}
}

func withAlarms(c model.Cluster, alarms ...model.Alarm) model.Cluster {
	c.Alarms = alarms
	return c
}

// TestDecideMaintenance: the maintenance step comes after the membership
// (a pending change first), under the cluster lock, and a wait is no
// action (the loop stays steady).
func TestDecideMaintenance(t *testing.T) {
	frag := db(100, 20)
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib}
	running := func(lock bool) model.Local {
		return model.Local{Running: true, LockHeld: lock, Answer: &model.Answer{MemberID: 1, Leader: 1}}
	}
	tests := []struct {
		name    string
		desired []spec.Member
		obs     model.Cluster
		pol     DefragPolicy
		lock    bool
		kind    ActionKind
		key     string
	}{
		{"takes the lock", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), on, false, DoTakeLock, "lock/maintenance/defrag/2"},
		{"defragments with it", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), on, true, DoDefrag, "maintenance/defrag/2"},
		{"moves leadership with it", specNodes(3), observed(1, nodes(3, map[int][]memberMod{1: {frag}})...), on, true, DoChangeMembership, "maintenance/move-leader/1"},
		{"membership first", specNodes(4), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), on, true, DoWait, ""},
		{"a removal first", specNodes(2), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), on, true, DoChangeMembership, "change/remove/3"},
		{"a wait is no action", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {frag, lagging}})...), on, true, DoNothing, "maintenance-wait/defrag node# waits: node# is catching up (index # behind the leader)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			in := Input{Self: tt.desired[0], InSpec: true, Desired: tt.desired, Local: running(tt.lock), Cluster: &obs, Defrag: tt.pol, Agents: []model.AgentRecord{}}
			got := Decide(in)
			if got.Kind != tt.kind || (tt.key != "" && got.Key != tt.key) {
				t.Errorf("got %s %q (%s), want %s %q", got.Kind, got.Key, got.Reason, tt.kind, tt.key)
			}
		})
	}
}

func TestDefragCommand(t *testing.T) {
	frag := db(100, 20)
	pol := DefragPolicy{MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Window: window(t, "Sat 02:00-05:00 UTC")}
	named := func(n string, done ...uint64) DefragPolicy {
		p := pol
		p.Member, p.Done = n, map[uint64]bool{}
		for _, id := range done {
			p.Done[id] = true
		}
		return p
	}
	tests := []struct {
		name     string
		desired  []spec.Member
		obs      model.Cluster
		pol      DefragPolicy
		kind     StepKind
		member   uint64
		contains string
	}{
		{"outside the window, disabled: runs now", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), pol, StepDefrag, 2, "defragment node2"},
		{"membership first", specNodes(2), observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), pol, StepWait, 0, "membership first: the agents' next change is: remove node3"},
		{"a named member once", specNodes(3), observed(1, nodes(3, nil)...), named("node2"), StepDefrag, 2, "defragment node2"},
		{"a named member done", specNodes(3), observed(1, nodes(3, nil)...), named("node2", 2), StepNone, 0, "node2 is defragmented"},
		{"done members are not picked again", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {frag}, 3: {frag}})...),
			DefragPolicy{MinFreeRatio: 0.5, MinFreeBytes: 10 * mib, Done: map[uint64]bool{2: true}}, StepDefrag, 3, "defragment node3"},
		// The command checks for NOSPACE before it takes the lock, but it
		// acts for minutes (a member at a time): NOSPACE raised meanwhile
		// makes the leader's agent act without the lock, so the command,
		// which holds it, must stop rather than defragment beside it.
		{"NOSPACE raised after the command began: it stops", specNodes(3), noSpaceOn(observed(1, nodes(3, map[int][]memberMod{2: {frag}})...), 1), pol, StepWait, 0, "NOSPACE is raised"},
		{"a db at its quota (NOSPACE to come): it stops", specNodes(3), observed(1, nodes(3, map[int][]memberMod{2: {quota(16, 2, 16)}})...), pol, StepWait, 0, "NOSPACE is raised"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DefragCommand(tt.desired, tt.obs, nil, tt.pol, planTimeout)
			if got.Kind != tt.kind || (tt.member != 0 && got.MemberID != tt.member) || !reasonHas(got.Reason, tt.contains) {
				t.Errorf("got %s %x %q, want %s %x containing %q", got.Kind, got.MemberID, got.Reason, tt.kind, tt.member, tt.contains)
			}
		})
	}
}

func TestLeaderMove(t *testing.T) {
	tests := []struct {
		name     string
		desired  []spec.Member
		obs      model.Cluster
		to       string
		kind     StepKind
		target   uint64
		contains string
	}{
		{"to a caught-up voter", specNodes(3), observed(1, nodes(3, nil)...), "node3", StepMoveLeader, 3, "move leader from node1 to node3"},
		{"already leads", specNodes(3), observed(1, nodes(3, nil)...), "node1", StepNone, 0, "node1 leads already"},
		{"no such member", specNodes(3), observed(1, nodes(3, nil)...), "node9", StepWait, 0, "no started member of that name"},
		{"a lagging voter", specNodes(3), observed(1, nodes(3, map[int][]memberMod{3: {lagging}})...), "node3", StepWait, 0, "node3 is catching up"},
		{"a member down", specNodes(3), observed(1, nodes(3, map[int][]memberMod{3: {down}})...), "node3", StepWait, 0, "it does not answer"},
		{"a learner", specNodes(3), observed(1, with(nodes(2, nil), mem(3, "node3", learner(0)))...), "node3", StepWait, 0, "it is a learner"},
		{"not in the spec", specNodes(2), observed(1, nodes(3, nil)...), "node3", StepWait, 0, "the spec does not list it"},
		{"no leader", specNodes(3), observed(0, nodes(3, nil)...), "node3", StepWait, 0, "no leader"},
		// Under NOSPACE the leader's agent moves leadership itself, without
		// the lock: a move by the command beside it is a second actor.
		{"NOSPACE raised", specNodes(3), noSpaceOn(observed(1, nodes(3, nil)...), 1), "node3", StepWait, 0, "NOSPACE is raised"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LeaderMove(tt.desired, tt.obs, tt.to)
			if got.Kind != tt.kind || got.To != tt.target || !reasonHas(got.Reason, tt.contains) {
				t.Errorf("got %s to %x %q, want %s to %x containing %q", got.Kind, got.To, got.Reason, tt.kind, tt.target, tt.contains)
			}
		})
	}
}

// TestDefragDue: the metric EtcdkeeperDBFragmented fires on says a member
// is due only when the agents' own rule would defragment it now: enabled,
// inside the window, the spec's thresholds (not the defaults) and the
// floor reached.
func TestDefragDue(t *testing.T) {
	sat3 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC) // a Saturday
	mon3 := sat3.AddDate(0, 0, 2)
	member := func(size, inUse int64) model.Member {
		return model.Member{ID: 1, Name: "node1", DBSize: size * mib, DBSizeInUse: inUse * mib}
	}
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib}
	weekly := on
	weekly.Window = window(t, "Sat 02:00-05:00 UTC")
	low := DefragPolicy{Enabled: true, MinFreeRatio: 0.2, MinFreeBytes: 2 * mib}
	zero := DefragPolicy{Enabled: true}
	learner := member(100, 20)
	learner.IsLearner = true
	tests := []struct {
		name string
		pol  DefragPolicy
		m    model.Member
		at   time.Time
		want bool
	}{
		{"over both thresholds", on, member(100, 20), mon3, true},
		{"under the ratio", on, member(100, 60), mon3, false},
		{"under the bytes", on, member(18, 9), mon3, false},
		{"the spec's lower thresholds, not the defaults", low, member(16, 12), mon3, true},
		{"disabled", DefragPolicy{MinFreeRatio: 0.5, MinFreeBytes: 10 * mib}, member(100, 20), mon3, false},
		{"outside its window", weekly, member(100, 20), mon3, false},
		{"inside its window", weekly, member(100, 20), sat3, true},
		{"thresholds of 0: a packed db is not due", zero, member(16, 16), mon3, false},
		{"thresholds of 0: less than the floor free is not due", zero, model.Member{DBSize: 16 * mib, DBSizeInUse: 16*mib - DefragFloor/2}, mon3, false},
		{"a learner", on, learner, mon3, false},
		{"no status answer", on, model.Member{ID: 1}, mon3, false},
	}
	for _, tt := range tests {
		if got := DefragDue(tt.pol, tt.m, tt.at); got != tt.want {
			t.Errorf("%s: DefragDue = %v, want %v", tt.name, got, tt.want)
		}
	}
}
