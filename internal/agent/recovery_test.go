package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
)

// TestRecoverWaitsForTheFirstPass: a request that arrives before the
// loop's first pass is never judged on the status nobody has filled yet
// (all zero: it would pass for "no quorum"): without the pass it is
// refused, nothing journaled; after a pass that saw a healthy voter of a
// cluster with a quorum, it is refused for that; after one that saw no
// quorum, it is taken.
func TestRecoverWaitsForTheFirstPass(t *testing.T) {
	a := newTestAgent(t, "", nil)
	_, self := a.Spec()
	self.StateDir = t.TempDir()
	a.self = self
	defer func(d time.Duration) { firstPassWait = d }(firstPassWait)
	firstPassWait = 100 * time.Millisecond
	req := recovery.Request{ID: "evil1", Role: recovery.RoleSource, Source: "a"}
	journal := filepath.Join(self.StateDir, recoveryFile)

	if _, err := a.Recover(req); err == nil || !strings.Contains(err.Error(), "has not finished its first look at its member") {
		t.Fatalf("before the first pass: %v, want a refusal", err)
	}
	if _, err := os.Stat(journal); err == nil {
		t.Fatal("a request before the first pass was journaled")
	}

	a.noteView(model.Cluster{LeaderID: 1, Members: []model.Member{{ID: 1, Name: "a", Healthy: true}, {ID: 2, Name: "b", Healthy: true}, {ID: 3, Name: "c", Healthy: true}}})
	a.updateStatus(func(s *Status) { s.Healthy = true })
	a.observedOnce.Do(func() { close(a.observed) })
	if _, err := a.Recover(req); err == nil || !strings.Contains(err.Error(), "a is a healthy voter and 3 of 3 voters are healthy") {
		t.Fatalf("after a pass that saw a quorum: %v, want a refusal", err)
	}
	if _, err := os.Stat(journal); err == nil {
		t.Fatal("a request on a healthy cluster was journaled")
	}

	a.updateStatus(func(s *Status) { s.Healthy, s.HealthyVoters, s.Quorum = false, 1, false })
	if j, err := a.Recover(req); err != nil || j.Step != recovery.StepRequested {
		t.Fatalf("after a pass that saw no quorum: %+v, %v; want requested", j, err)
	}
}
