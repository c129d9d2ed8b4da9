package agent

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// TestCountersBornAtZero: every label value the agent counts exists at 0
// before its first event (Prometheus's increase() cannot see the first
// sample of a series, so an event that creates its series is lost on the
// dashboard and to the alerts).
func TestCountersBornAtZero(t *testing.T) {
	m := metrics.New()
	var causes []string
	for c := repair.ClassNone; c <= repair.ClassUnknown; c++ {
		causes = append(causes, c.String())
	}
	kinds := []string{"add-learner", "promote"} // the rejoin's and the promotion's
	for k := reconcile.StepRemove; k <= reconcile.StepMoveLeader; k++ {
		kinds = append(kinds, k.String())
	}
	for _, tt := range []struct {
		name   string
		metric string
		want   []string
	}{
		{"etcd restarts by cause", "etcdkeeper_etcd_restarts_total", causes},
		{"membership changes by kind", "etcdkeeper_membership_changes_total", kinds},
		{"alarms disarmed", "etcdkeeper_alarms_disarmed_total", []string{"NOSPACE", "CORRUPT"}},
	} {
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range tt.want {
			found := false
			for _, mf := range mfs {
				if mf.GetName() != tt.metric {
					continue
				}
				for _, s := range mf.GetMetric() {
					for _, l := range s.GetLabel() {
						if strings.EqualFold(l.GetValue(), v) && s.GetCounter().GetValue() == 0 {
							found = true
						}
					}
				}
			}
			if !found {
				t.Errorf("%s: no %s series at 0 for %q before its first event", tt.name, tt.metric, v)
			}
		}
	}
}
