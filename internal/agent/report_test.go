package agent

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReportLogsOnKeyChange: a decision is logged when its key changes,
// not on every pass while a duration in its reason ticks on.
func TestReportLogsOnKeyChange(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	a := newTestAgent(t, "", zap.New(core))
	learner := func(d string) reconcile.Action {
		return reconcile.Action{Kind: reconcile.DoWait, Key: "plan/learner", Reason: "waiting: node4 is a learner for " + d}
	}
	a.report(learner("1s"), learner("1s").Reason, nil)
	a.report(learner("3s"), learner("3s").Reason, nil)
	a.report(learner("5s"), learner("5s").Reason, nil)
	a.report(reconcile.Action{Kind: reconcile.DoNothing, Key: "healthy-voter", Reason: "no action"}, "no action", nil)
	a.report(reconcile.Action{Kind: reconcile.DoNothing, Key: "healthy-voter", Reason: "no action"}, "no action", errors.New("boom"))
	a.report(reconcile.Action{Kind: reconcile.DoNothing, Key: "healthy-voter", Reason: "no action"}, "no action", errors.New("boom"))
	got := logs.FilterMessage("decision").All()
	want := []string{"waiting: node4 is a learner for 1s", "no action", "no action: boom"}
	if len(got) != len(want) {
		t.Fatalf("%d decision lines, want %d: %v", len(got), len(want), got)
	}
	for i, e := range got {
		if d := e.ContextMap()["decision"]; d != want[i] {
			t.Errorf("line %d: decision %q, want %q", i, d, want[i])
		}
	}
	if st := a.Status(); st.Decision != "no action: boom" || st.LastError != "boom" {
		t.Errorf("status decision %q error %q", st.Decision, st.LastError)
	}
}

// TestPhaseOf: the phase each kind of step reports.
func TestPhaseOf(t *testing.T) {
	in := reconcile.Input{}
	if p := phaseOf(reconcile.Action{Kind: reconcile.DoRejoin, Start: reconcile.StartDecision{Repair: true}}, in); p != "repairing" {
		t.Errorf("repair rejoin: %s", p)
	}
	if p := phaseOf(reconcile.Action{Kind: reconcile.DoRejoin}, in); p != "joining" {
		t.Errorf("join: %s", p)
	}
	if p := phaseOf(reconcile.Action{Kind: reconcile.DoIdle}, in); p != "idle" {
		t.Errorf("idle: %s", p)
	}
	if p := phaseOf(reconcile.Action{Kind: reconcile.DoWait}, in); p != "waiting" {
		t.Errorf("wait: %s", p)
	}
}

// TestRefusedRepairCounted: a repair refused by a guard counts once per
// refusal (the EtcdkeeperRepairRefused alert reads it), not once a pass.
func TestRefusedRepairCounted(t *testing.T) {
	a := newTestAgent(t, "", nil)
	refused := reconcile.Action{Kind: reconcile.DoWait, Key: "start/wait/rate", Reason: "waiting: data is corrupt; not repairing: rate limit",
		Start: reconcile.StartDecision{Action: reconcile.ActWait, RepairRefused: true}}
	for range 3 {
		a.report(refused, refused.Reason, nil)
	}
	if got := testutil.ToFloat64(a.metrics.Repairs.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused repairs = %v after one refusal seen on 3 passes, want 1", got)
	}
}

// TestNoSpaceNotClearedUnobserved: NOSPACE is "cleared" only by an
// observation that could have seen it: a pass that observed nothing (the
// local etcd restarting for a raised quota) or only members that did not
// answer (all busy, a partition) keeps it raised; one in which a member
// answers without the alarm clears it. One log line per change.
func TestNoSpaceNotClearedUnobserved(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	a := newTestAgent(t, "", zap.New(core))
	noSpace := []model.Alarm{{MemberID: 1, Type: model.AlarmNoSpace}}
	answer := &model.Answer{MemberID: 1, Leader: 1, Alarms: noSpace}
	raisedView := model.Cluster{LeaderID: 1, Alarms: noSpace, Members: []model.Member{{ID: 1, Name: "a", Leader: 1}}}
	silent := model.Cluster{Members: []model.Member{{ID: 1, Name: "a", Err: "context deadline exceeded"}}}
	clear := model.Cluster{LeaderID: 1, Members: []model.Member{{ID: 1, Name: "a", Leader: 1}}}
	wait := reconcile.Action{Kind: reconcile.DoWait, Key: "nospace-wait/x", Reason: "NOSPACE: x"}
	steps := []struct {
		name string
		in   reconcile.Input
		want bool
	}{
		{"raised", reconcile.Input{Cluster: &raisedView, Local: model.Local{Answer: answer}}, true},
		{"nothing observed", reconcile.Input{}, true},
		{"no member answered", reconcile.Input{Cluster: &silent}, true},
		{"a member answers without it", reconcile.Input{Cluster: &clear, Local: model.Local{Answer: &model.Answer{MemberID: 1, Leader: 1}}}, false},
	}
	for _, s := range steps {
		a.noteNoSpace(s.in, wait)
		if a.noSpace.raised != s.want {
			t.Errorf("%s: raised %v, want %v", s.name, a.noSpace.raised, s.want)
		}
	}
	if n := logs.FilterMessage("NOSPACE cleared").Len(); n != 1 {
		t.Errorf("%d 'NOSPACE cleared' lines, want 1", n)
	}
}

// TestNoSpaceLineOfQuotaRaise: the restart for a quota raised under
// NOSPACE is part of the NOSPACE procedure: /status's NOSPACE line shows
// it, and the line that says the members restart with the raise fires
// when the refusal ("the data fills the quota") gives way to it. The
// decision comes from reconcile.Decide, so a renamed key or reworded
// reason cannot break it (7595587 matched a key prefix that no longer
// existed: the line stayed blank).
func TestNoSpaceLineOfQuotaRaise(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	a := newTestAgent(t, "", zap.New(core))
	const mib = 1 << 20
	noSpace := []model.Alarm{{MemberID: 2, Type: model.AlarmNoSpace}}
	member := func(id uint64, name string) model.Member {
		return model.Member{ID: id, Name: name, Leader: 3, Healthy: true, CaughtUp: true, DBSize: 16 * mib, DBSizeInUse: 15 * mib, Quota: 16 * mib,
			PeerURLs: []string{"http://127.0.0.1:2380"}, ClientURLs: []string{"http://127.0.0.1:2379"}}
	}
	c := model.Cluster{ClusterID: 9, LeaderID: 3, Alarms: noSpace, Members: []model.Member{member(1, "a"), member(2, "b"), member(3, "c")}}
	desired := []spec.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	in := reconcile.Input{Self: desired[0], InSpec: true, Desired: desired, Cluster: &c, Now: time.Now(),
		NoSpace: reconcile.NoSpacePolicy{Compact: true, Quotas: map[string]int64{"a": 64 * mib, "b": 64 * mib, "c": 64 * mib}},
		Local: model.Local{Running: true, Answer: &model.Answer{MemberID: 1, ClusterID: 9, Leader: 3, Alarms: noSpace},
			Restart: model.Restart{Why: "changed settings"}}}
	act := reconcile.Decide(in)
	if act.Kind != reconcile.DoRestart {
		t.Fatalf("decision %s (%s), want the quota-raise restart", act.Kind, act.Reason)
	}
	a.noSpace = noSpaceState{raised: true, since: time.Now(), full: "data in use 15.0 MiB of a 16.0 MiB quota on a"}
	a.noteNoSpace(in, act)
	if st := a.Status(); st.NoSpace != act.Reason {
		t.Errorf("NOSPACE line %q during the quota-raise restart, want the decision %q", st.NoSpace, act.Reason)
	}
	if n := logs.FilterMessage("NOSPACE: the spec raises the quota; the members restart with it").Len(); n != 1 {
		t.Errorf("%d lines saying the members restart with the raised quota, want 1", n)
	}
}
