package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestStatusLinePaused: a paused agent's STATUS line leads with the pause
// and what it would do, even while its member is a healthy voter.
func TestStatusLinePaused(t *testing.T) {
	st := Status{Member: "node2", Phase: model.PhaseRunning, Role: "voter", Healthy: true, Voters: 3, HealthyVoters: 3, Paused: true,
		Decision: "paused by root@node1 for 1h12m more: replacing a disk; would now: take-lock (taking the cluster lock to move leader from node3 to node1)"}
	line := statusLineOf(st)
	if !strings.HasPrefix(line, "node2: paused by root@node1 for 1h12m more: replacing a disk; would now: take-lock") {
		t.Errorf("STATUS line %q", line)
	}
	st.Decision, st.Paused = "no action: node2 is a healthy voter", false
	if line := statusLineOf(st); strings.Contains(line, "paused") || !strings.Contains(line, "3/3 healthy") {
		t.Errorf("STATUS line unpaused %q", line)
	}
}

// stateAgent is an agent of a one-member spec whose state dir is a new
// temporary one.
func stateAgent(t *testing.T) *Agent {
	t.Helper()
	s, err := spec.Parse([]byte(fmt.Sprintf(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
agent: {stateDir: %q}
`, t.TempDir())), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Spec: s, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLocalPauseKept: a pause taken without quorum is kept in the state
// dir, read back as local, and gone after resume, which also ends here
// the cluster's pause the agent last read.
func TestLocalPauseKept(t *testing.T) {
	a := stateAgent(t)
	if p := a.loadLocalPause(); p != nil {
		t.Fatalf("a fresh state dir holds a pause: %+v", p)
	}
	if err := a.PauseLocal(model.Pause{By: "root@node1", Reason: "quorum lost"}); err != nil {
		t.Fatal(err)
	}
	p := a.loadLocalPause()
	if p == nil || !p.Local || p.By != "root@node1" || p.Reason != "quorum lost" {
		t.Fatalf("local pause read back = %+v", p)
	}
	a.pauseMark.Store(&model.ResumeMark{ID: "p7", Revision: 7}) // the cluster's pause last read
	was, err := a.ResumeLocal()
	if err != nil || was == nil || was.By != "root@node1" {
		t.Fatalf("ResumeLocal = %+v, %v", was, err)
	}
	if r := a.resumedMark(); r.ID != "p7" || r.Revision != 7 {
		t.Errorf("resumed mark = %+v, want p7 at 7: the cluster's pause this agent held is over here", r)
	}
	if p := a.loadLocalPause(); p != nil {
		t.Fatalf("a pause is left after resume: %+v", p)
	}
	if was, err := a.ResumeLocal(); err != nil || was != nil {
		t.Fatalf("a second ResumeLocal = %+v, %v; want none", was, err)
	}
}

// TestPauseAfterRevisionWentBack is G5 (safety review 2026-12-03): resume
// ends the pause it reached, not every pause at or below its revision.
// Once the cluster's revision goes back (recover from a lagging source,
// --bump-revision 0, a rebuilt cluster), a new pause has a lower revision
// than the one resumed; it must hold all the same. 7595587 dropped it.
func TestPauseAfterRevisionWentBack(t *testing.T) {
	a := stateAgent(t)
	first := &model.Pause{By: "root@node1", Reason: "first", Revision: 900}
	a.pause = first
	var in reconcile.Input
	a.observePause(context.Background(), &in)
	if !in.Pause.InForce(in.Now) {
		t.Fatal("the first pause is not in force")
	}
	if _, err := a.ResumeLocal(); err != nil {
		t.Fatal(err)
	}
	in = reconcile.Input{}
	a.observePause(context.Background(), &in)
	if in.Pause.InForce(in.Now) {
		t.Fatalf("the resumed pause still holds: %+v", in.Pause)
	}
	// The cluster was recovered from a member that had applied less: the
	// second operator's pause is written at a lower revision.
	a.pause = &model.Pause{By: "root@node2", Reason: "second operator", Revision: 40}
	in = reconcile.Input{}
	a.observePause(context.Background(), &in)
	if !in.Pause.InForce(in.Now) || in.Pause.Reason != "second operator" {
		t.Errorf("a new pause at a lower revision than the resumed one: %+v, want it in force", in.Pause)
	}
}
