package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Reviewer's tests (space-review): each one fails on main as of 36baf47
// and shows a finding of the space review; the fix makes it pass.

// TestReviewFollowerSaysDataFillsQuota: a follower's agent never compacts
// (the leader's does), so its Local.Compacted stays 0. When the data
// fills the quota it must say so, like the leader's agent, not "the agent
// of node1 takes the procedure's steps (next: compact to revision 50 ...)"
// for as long as NOSPACE lasts (what its /status, STATUS and log show).
func TestReviewFollowerSaysDataFillsQuota(t *testing.T) {
	full := quota(16, 16, 16)
	obs := noSpaceOn(observed(1, nodes(3, map[int][]memberMod{1: {full}, 2: {full}, 3: {full}})...), 1)
	desired := specNodes(3)
	local := model.Local{Running: true, Compacted: 0, Answer: &model.Answer{MemberID: 2, Leader: 1, Revision: 50,
		Alarms: []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}}}
	in := Input{Self: desired[1], InSpec: true, Desired: desired, Local: local, Cluster: &obs, NoSpace: NoSpacePolicy{Compact: true}}
	got := Decide(in)
	if !strings.HasPrefix(got.Key, "nospace-full/") || !strings.Contains(got.Reason, "raise etcd quota-backend-bytes or delete data") {
		t.Errorf("a follower's agent under a full quota says %q (%s), want the data-fills-the-quota message", got.Reason, got.Key)
	}
}

// TestReviewNothingToFreeIsNotDue: maintenance.defrag.minFreeRatio: 0
// with minFreeBytes: 0 is a valid spec; a member with nothing to free
// must not be due (seen live: 22 defragmentations freeing 0 B in 30 s,
// one every pass, each stalling that member).
func TestReviewNothingToFreeIsNotDue(t *testing.T) {
	packed := db(16, 16)
	obs := observed(1, nodes(3, map[int][]memberMod{1: {packed}, 2: {packed}, 3: {packed}})...)
	got := PlanMaintenance(specNodes(3), obs, DefragPolicy{Enabled: true, MinFreeRatio: 0, MinFreeBytes: 0})
	if got.Kind != StepNone {
		t.Errorf("with nothing free: %s %q, want none", got.Kind, got.Reason)
	}
}
