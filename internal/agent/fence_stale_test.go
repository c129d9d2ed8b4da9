package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
)

// TestFenceStaleReported: a fence whose source has not started after
// recovery.FenceStaleAfter is shown in /status, the STATUS= line and
// etcdkeeper_recovery_fence_stale (the EtcdkeeperRecoveryFenceStale
// alert); a young one is not (issue 20 / F7: on 8011516 nothing told).
func TestFenceStaleReported(t *testing.T) {
	a := newTestAgent(t, "", nil)
	stale := func() float64 {
		mfs, err := a.metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "etcdkeeper_recovery_fence_stale" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("etcdkeeper_recovery_fence_stale is not exported")
		return 0
	}
	j := recovery.Journal{Request: recovery.Request{ID: "r1", Role: recovery.RoleFenced, Source: "b"}, Step: recovery.StepFenced, StartedAt: time.Now()}
	a.updateStatus(func(s *Status) { s.Recovery = &j })
	if a.Status().FenceStale || stale() != 0 || strings.Contains(a.statusLine(), "STALE") {
		t.Errorf("a fence just taken is reported stale: %q", a.statusLine())
	}
	old := j
	old.StartedAt = time.Now().Add(-recovery.FenceStaleAfter - time.Second)
	a.updateStatus(func(s *Status) { s.Recovery = &old })
	if line := a.statusLine(); !a.Status().FenceStale || stale() != 1 || !strings.Contains(line, "FENCE STALE") || !strings.Contains(line, "recover --abort r1") {
		t.Errorf("a stale fence: status %v, metric %v, line %q", a.Status().FenceStale, stale(), line)
	}
	done := old
	done.Step = recovery.StepAborted
	a.updateStatus(func(s *Status) { s.Recovery = &done })
	if a.Status().FenceStale || stale() != 0 {
		t.Errorf("a fence called off is still reported stale")
	}
}
