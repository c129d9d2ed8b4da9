package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestRequest: an operator's request (defrag --yes, leader move) is one
// more rule of the loop: taken under the lock, by the budget's grant, held
// by a pause (G6: a pause taken while a command runs holds its next step),
// by NOSPACE and by a membership change first; what each pass made of it
// is typed in Action.Request.
func TestRequest(t *testing.T) {
	frag := db(100, 20)
	three := func(mods ...memberMod) model.Cluster {
		return observed(1, nodes(3, map[int][]memberMod{1: mods, 2: mods, 3: mods})...)
	}
	defrag2 := &model.Request{ID: "r1", Kind: model.RequestDefrag, Member: "node2", By: "root@h"}
	move3 := &model.Request{ID: "r2", Kind: model.RequestLeaderMove, To: "node3", By: "root@h"}
	pause := &model.Pause{By: "root@other", Reason: "disk work"}
	tests := []struct {
		name     string
		obs      model.Cluster
		req      *model.Request
		lock     bool
		pause    *model.Pause
		done     []uint64
		agents   []model.AgentRecord
		kind     ActionKind
		phase    model.RequestPhase
		contains string
	}{
		{"defrag a member: the lock first", three(frag), defrag2, false, nil, nil, nil, DoTakeLock, model.RequestActing, "defragment node2"},
		{"defrag a member under the lock", three(frag), defrag2, true, nil, nil, nil, DoDefrag, model.RequestActing, "defragment node2"},
		{"a member not fragmented: asked for, all the same", three(db(10, 9)), defrag2, true, nil, nil, nil, DoDefrag, model.RequestActing, "asked for"},
		{"done by this agent: done", three(frag), defrag2, true, nil, []uint64{2}, nil, DoNothing, model.RequestDone, "node2 is defragmented"},
		{"done by another agent (its record): done", three(frag), defrag2, false, nil, nil,
			[]model.AgentRecord{{Name: "node1", Request: &model.RequestProgress{ID: "r1", Done: []uint64{2}}}}, DoNothing, model.RequestDone, "node2 is defragmented"},
		{"another request's record does not count", three(frag), defrag2, true, nil, nil,
			[]model.AgentRecord{{Name: "node1", Request: &model.RequestProgress{ID: "old", Done: []uint64{2}}}}, DoDefrag, model.RequestActing, "defragment node2"},
		{"paused: held, and says so (G6)", three(frag), defrag2, true, pause, nil, nil, DoWait, model.RequestWaiting, "paused by root@other"},
		{"a member down: waits (the budget)", observed(1, nodes(3, map[int][]memberMod{1: {frag}, 2: {frag}, 3: {frag, down}})...), defrag2, true, nil, nil, nil,
			DoNothing, model.RequestWaiting, "node3 is not a healthy voter"},
		{"NOSPACE: the procedure first, the request waits", noSpaceOn(three(quota(16, 15, 16)), 1), defrag2, true, nil, nil, nil, DoDefrag, model.RequestWaiting, "NOSPACE"},
		{"leader move: under the lock", three(), move3, true, nil, nil, nil, DoChangeMembership, model.RequestActing, "move leader from node1 to node3"},
		{"leader move: done once it leads", observed(3, nodes(3, nil)...), move3, false, nil, nil, nil, DoNothing, model.RequestDone, "node3 leads already"},
		{"leader move to a lagging member: waits", observed(1, nodes(3, map[int][]memberMod{3: {lagging}})...), move3, true, nil, nil, nil, DoNothing, model.RequestWaiting, "not moving leadership to node3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs
			in := Input{Self: specNodes(3)[0], InSpec: true, Desired: specNodes(3), Cluster: &obs, Now: planNow, Request: tt.req, Memory: model.Memory{Compacted: 50, RequestDone: tt.done},
				Agents: tt.agents, Pause: tt.pause, NoSpace: NoSpacePolicy{Compact: true},
				Local: model.Local{Running: true, LockHeld: tt.lock, Answer: &model.Answer{MemberID: 1, ClusterID: obs.ClusterID, Leader: obs.LeaderID, Revision: 50}}}
			got := Decide(in)
			if got.Kind != tt.kind || got.Request == nil || got.Request.ID != tt.req.ID || got.Request.Phase != tt.phase || !strings.Contains(got.Request.Text, tt.contains) {
				t.Errorf("got %s %+v (%s), want %s, %s containing %q", got.Kind, got.Request, got.Reason, tt.kind, tt.phase, tt.contains)
			}
		})
	}
	obs := three(frag)
	if got := Decide(Input{Self: specNodes(3)[0], InSpec: true, Desired: specNodes(3), Cluster: &obs, Now: planNow,
		Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 1, Leader: 1}}}); got.Request != nil {
		t.Errorf("no request: %+v", got.Request)
	}
}
