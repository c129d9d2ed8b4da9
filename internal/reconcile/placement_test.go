package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// diskRec is member id's agent record with a disk measurement: p99 in
// milliseconds, above the floor for long enough when it is.
func diskRec(id uint64, p99 int) model.AgentRecord {
	d := &model.DiskLatency{WALFsyncP99: time.Duration(p99) * time.Millisecond}
	d.Sustained = d.WALFsyncP99 >= model.SlowDiskFloor
	return model.AgentRecord{Name: "node" + string(rune('0'+id)), MemberID: id, Disk: d}
}

func tagged(desired []spec.Member, tags map[string]string) []spec.Member {
	for i := range desired {
		desired[i].Leader = tags[desired[i].Name]
	}
	return desired
}

// TestLeaderPlacement: leadership leaves a slow disk and a member the
// spec avoids, goes to one it prefers, never onto a slow disk, waits
// beside a disruption, an alarm and a move in the last 10 minutes, and
// goes under the cluster lock.
func TestLeaderPlacement(t *testing.T) {
	fast := []model.AgentRecord{diskRec(1, 2), diskRec(2, 2), diskRec(3, 3)}
	slow1 := []model.AgentRecord{diskRec(1, 200), diskRec(2, 2), diskRec(3, 3)}
	slow2 := []model.AgentRecord{diskRec(1, 2), diskRec(2, 200), diskRec(3, 3)}
	tests := []struct {
		name    string
		tags    map[string]string
		obs     model.Cluster
		recs    []model.AgentRecord
		lock    bool
		moved   bool // the cluster's leader-moved key is there
		kind    ActionKind
		to      uint64
		placing string
		reason  string
	}{
		{name: "all fast, no tags: nothing", recs: fast, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "slow leader: take the lock", recs: slow1, obs: observed(1, nodes(3, nil)...), kind: DoTakeLock, placing: PlaceSlowDisk, reason: "node1's disk is slow"},
		{name: "slow leader: moved off with the lock, to the most advanced", recs: slow1, lock: true, obs: observed(1, nodes(3, map[int][]memberMod{3: {index(120)}})...),
			kind: DoPlaceLeader, to: 3, placing: PlaceSlowDisk, reason: "move leader from node1 to node3: node1's disk is slow"},
		{name: "slow follower: nothing", recs: slow2, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "slow leader, the others cannot take over", recs: slow1, lock: true, obs: observed(1, nodes(3, map[int][]memberMod{2: {down}, 3: {lagging}})...), kind: DoNothing},
		{name: "slow leader beside a member down: waits", recs: slow1, lock: true, obs: observed(1, nodes(3, map[int][]memberMod{2: {down}})...), kind: DoNothing,
			reason: "the leader move waits: node2 is not a healthy voter"},
		{name: "slow leader under an alarm: waits", recs: slow1, lock: true, obs: withAlarms(observed(1, nodes(3, nil)...), model.Alarm{Type: model.AlarmCorrupt, MemberID: 3}), kind: DoNothing,
			reason: "the leader move waits: a CORRUPT alarm"},
		{name: "slow leader, the agents moved leadership within 10 minutes: waits", recs: slow1, lock: true, moved: true, obs: observed(1, nodes(3, nil)...), kind: DoNothing,
			reason: "the agents moved leadership in the last 10m (by agent node3 at 11:58:00 UTC: move leader from node2 to node1 (the operator's request)), and the placement moves none sooner"},
		{name: "preferred member, an operator moved leadership away: left there", tags: map[string]string{"node3": "prefer"}, recs: fast, lock: true, moved: true, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "slow leader during a rollout: waits for it", recs: append(slow1[:2:2], model.AgentRecord{Name: "node3", MemberID: 3, RestartPending: "changed settings", Disk: slow1[2].Disk}), lock: true,
			obs: observed(1, nodes(3, nil)...), kind: DoNothing, reason: "the leader move waits for the rollout: node3's member is due for a restart"},
		{name: "preferred member, agents on different specs: waits", tags: map[string]string{"node3": "prefer"}, recs: []model.AgentRecord{{Name: "node1", Generation: "g1"}, {Name: "node2", Generation: "g2"}}, lock: true,
			obs: observed(1, nodes(3, nil)...), kind: DoNothing, reason: "different spec generations"},
		{name: "avoided leader: moved off", tags: map[string]string{"node1": "avoid"}, recs: fast, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoPlaceLeader, placing: PlaceAvoid,
			reason: "the spec says leader: avoid for node1"},
		{name: "avoided everywhere but the leader's: nothing", tags: map[string]string{"node2": "avoid", "node3": "avoid"}, recs: fast, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "preferred member takes over", tags: map[string]string{"node3": "prefer"}, recs: fast, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoPlaceLeader, to: 3, placing: PlacePrefer,
			reason: "the spec says leader: prefer for node3"},
		{name: "preferred leader: nothing", tags: map[string]string{"node1": "prefer"}, recs: fast, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "preferred member with a slow disk: not onto it", tags: map[string]string{"node2": "prefer"}, recs: slow2, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
		{name: "slow preferred leader: moved off", tags: map[string]string{"node1": "prefer"}, recs: slow1, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoPlaceLeader, placing: PlaceSlowDisk},
		{name: "slow leader: not onto the avoided member", tags: map[string]string{"node2": "avoid"}, recs: slow1, lock: true, obs: observed(1, nodes(3, map[int][]memberMod{2: {index(500)}})...),
			kind: DoPlaceLeader, to: 3, placing: PlaceSlowDisk},
		{name: "preferred member lagging: nothing", tags: map[string]string{"node3": "prefer"}, recs: fast, lock: true, obs: observed(1, nodes(3, map[int][]memberMod{3: {lagging}})...), kind: DoNothing},
		{name: "no records: nothing slow", recs: nil, lock: true, obs: observed(1, nodes(3, nil)...), kind: DoNothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			recs := tt.recs
			if tt.moved {
				obs.LeaderMoved = &model.LeaderMoved{By: "node3", From: 2, To: 1, Why: "move leader from node2 to node1 (the operator's request)", At: planNow.Add(-2 * time.Minute)}
			}
			in := Input{Self: specNodes(3)[1], InSpec: true, Desired: tagged(specNodes(3), tt.tags), Cluster: &obs, Agents: recs, Now: planNow,
				Local: model.Local{Running: true, LockHeld: tt.lock, Answer: &model.Answer{MemberID: 2, Leader: 1}}}
			got := Decide(in)
			if got.Kind != tt.kind {
				t.Fatalf("got %s (%s), want %s", got.Kind, got.Reason, tt.kind)
			}
			if tt.to != 0 && got.Step.To != tt.to {
				t.Errorf("moves to %x, want %x (%s)", got.Step.To, tt.to, got.Reason)
			}
			if got.Placement != tt.placing {
				t.Errorf("placement %q, want %q", got.Placement, tt.placing)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason %q, want it to say %q", got.Reason, tt.reason)
			}
			if got.Kind == DoPlaceLeader && (got.Step.Kind != StepMoveLeader || got.Step.MemberID != 1 || !got.ReleaseLock) {
				t.Errorf("step %+v: not a move off the leader", got.Step)
			}
		})
	}
}

// TestHandOffAvoidsSlowDisks: every hand-off (a restart's, a turn's, a
// defragmentation's) goes to the best fit, not the most advanced index.
func TestHandOffAvoidsSlowDisks(t *testing.T) {
	obs := observed(1, nodes(3, map[int][]memberMod{2: {index(500)}})...)
	recs := []model.AgentRecord{diskRec(1, 2), diskRec(2, 300), diskRec(3, 2)}
	b := budget{plan: planViewOf(specNodes(3), obs, model.NewView(obs, recs)), agents: recs}
	g := b.grant(Request{Member: 1, Kind: DisruptRestart, Why: "settings"}, Queue{}, false)
	if g.HandOff == nil || g.HandOff.To != 3 {
		t.Fatalf("hand-off %+v, want to node3 (node2 is further ahead, but its disk is slow)", g.HandOff)
	}
	b = budget{plan: planViewOf(specNodes(3), obs, model.NewView(obs, nil))}
	if g := b.grant(Request{Member: 1, Kind: DisruptRestart, Why: "settings"}, Queue{}, false); g.HandOff == nil || g.HandOff.To != 2 {
		t.Fatalf("hand-off %+v without disk figures, want the most advanced, node2", g.HandOff)
	}
}

// TestPlacementAfterDefrag: a preferred leader due for a defragmentation
// hands its leadership off and is defragmented as a follower; the
// placement does not move leadership back in between (review 4).
func TestPlacementAfterDefrag(t *testing.T) {
	frag := db(100, 20)
	on := DefragPolicy{Enabled: true, MinFreeRatio: 0.5, MinFreeBytes: 10 * mib}
	desired := tagged(specNodes(3), map[string]string{"node1": "prefer"})
	local := model.Local{Running: true, LockHeld: true, Answer: &model.Answer{MemberID: 2, Leader: 2}}
	// The hand-off made node2 the leader; node1 is still due.
	obs := observed(2, nodes(3, map[int][]memberMod{1: {frag}})...)
	in := Input{Self: desired[1], InSpec: true, Desired: desired, Local: local, Cluster: &obs, Defrag: on, Agents: []model.AgentRecord{}, Now: planNow}
	if got := Decide(in); got.Kind != DoDefrag || got.Step.MemberID != 1 {
		t.Fatalf("got %s %q, want node1's defragmentation before the placement", got.Kind, got.Reason)
	}
}
