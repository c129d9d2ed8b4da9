package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSpaceMetrics: the members' gauges follow the last observation (a
// member gone leaves them), and each run counts by result.
func TestSpaceMetrics(t *testing.T) {
	m := New()
	m.Space.SetMembers([]MemberSpace{{Name: "node1", DBSize: 1000, InUse: 250, Quota: 4000}, {Name: "node2", DBSize: 800, InUse: 800, Quota: 4000}, {Name: "", DBSize: 0}})
	want := `
# HELP etcdkeeper_member_db_free_ratio Fraction of each member's db file that is free: (dbSize - dbSizeInUse) / dbSize.
# TYPE etcdkeeper_member_db_free_ratio gauge
etcdkeeper_member_db_free_ratio{member="node1"} 0.75
etcdkeeper_member_db_free_ratio{member="node2"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "etcdkeeper_member_db_free_ratio"); err != nil {
		t.Error(err)
	}
	m.Space.SetMembers([]MemberSpace{{Name: "node1", DBSize: 300, InUse: 250, Quota: 4000}})
	if n := testutil.CollectAndCount(m.Space.DBSize); n != 1 {
		t.Errorf("%d db size series after node2 left, want 1", n)
	}
	m.Space.DefragDone(2*time.Second, 700, nil)
	m.Space.DefragDone(time.Second, 0, errors.New("deadline"))
	if v := testutil.ToFloat64(m.Space.DefragFreed); v != 700 {
		t.Errorf("freed %v, want 700", v)
	}
	for result, want := range map[string]float64{"done": 1, "failed": 1} {
		if v := testutil.ToFloat64(m.Space.DefragRuns.WithLabelValues(result)); v != want {
			t.Errorf("runs %s = %v, want %v", result, v, want)
		}
	}
}

// TestNoSpaceMetrics: every observed member has its NOSPACE gauge, at 0
// until an alarm names it; the steps are born at 0.
func TestNoSpaceMetrics(t *testing.T) {
	m := New()
	for _, st := range []string{"compact", "disarm", "refused", "failed"} {
		if n := testutil.CollectAndCount(m.Space.NoSpaceSteps.WithLabelValues(st)); n != 1 {
			t.Errorf("step %s: %d series", st, n)
		}
	}
	m.Space.SetMembers([]MemberSpace{{Name: "node1", DBSize: 1000, Quota: 1000, NoSpace: true}, {Name: "node2", DBSize: 900, Quota: 1000}, {Name: ""}})
	want := `
# HELP etcdkeeper_member_nospace_alarm 1 while etcd's NOSPACE alarm names the member (the cluster refuses writes), else 0; every member as this agent last observed it.
# TYPE etcdkeeper_member_nospace_alarm gauge
etcdkeeper_member_nospace_alarm{member="node1"} 1
etcdkeeper_member_nospace_alarm{member="node2"} 0
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "etcdkeeper_member_nospace_alarm"); err != nil {
		t.Error(err)
	}
	m.Space.SetMembers([]MemberSpace{{Name: "node1", DBSize: 500, Quota: 1000}})
	if v := testutil.ToFloat64(m.Space.NoSpaceAlarm.WithLabelValues("node1")); v != 0 {
		t.Errorf("node1's alarm gauge %v after the disarm, want 0", v)
	}
}
