package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// TestHistoryWaitsForTheStateDir: an event the mirror cannot take is
// reported as a state dir write error and kept; once the state dir can
// be written again, the next pass writes it and the report clears.
func TestHistoryWaitsForTheStateDir(t *testing.T) {
	a := newTestAgent(t, "", nil)
	dir := filepath.Join(t.TempDir(), "state")
	a.history = history.NewMirror(filepath.Join(dir, history.FileName), history.Keep)

	a.remember(history.Event{Kind: "promote", MemberID: "8e9e05c52164694d"})
	a.remember(history.Event{Kind: "repair-done", MemberID: "8e9e05c52164694d", Reason: "data is corrupt"})
	if e := a.Status().StateDirError; !strings.Contains(e, history.FileName) {
		t.Fatalf("state dir error %q, want the mirror's write error", e)
	}
	a.saveHistory() // a pass, the dir still missing
	if e := a.Status().StateDirError; e == "" {
		t.Fatalf("the state dir error cleared while the mirror still cannot be written")
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a.saveHistory()
	if e := a.Status().StateDirError; e != "" {
		t.Errorf("state dir error %q after the mirror was written", e)
	}
	evs, err := a.History()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Kind != "promote" || evs[1].Kind != "repair-done" || evs[0].Host != "a" {
		t.Fatalf("mirror = %+v, want both events of host a, in order", evs)
	}
	if !a.historyPending.Load() {
		t.Errorf("the events are not marked for a push to the cluster")
	}
}

// TestRepairRetryRecordedOnce: a repair step that fails is a retry (the
// journal stays open), recorded once while it fails the same way, and
// again for a new step, a new error or a new repair.
func TestRepairRetryRecordedOnce(t *testing.T) {
	a := newTestAgent(t, "", nil)
	a.history = history.NewMirror(filepath.Join(t.TempDir(), history.FileName), history.Keep)
	j := repair.Journal{ID: "r1", Step: repair.StepSnapshot}
	refused := errors.New("etcdserver: re-configuration failed due to not enough started members")
	for range 3 {
		a.rememberRejoinError("data is corrupt", j, refused)
	}
	j.Step = repair.StepRemove
	a.rememberRejoinError("data is corrupt", j, refused)
	a.rememberRejoinError("data is corrupt", j, errors.New("context deadline exceeded"))
	a.rememberRejoinError("data is corrupt", repair.Journal{ID: "r2", Step: repair.StepRemove}, errors.New("context deadline exceeded"))
	evs, err := a.History()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.Kind != "repair-retry" {
			t.Errorf("event kind %q, want repair-retry", e.Kind)
		}
		got = append(got, e.Detail["rejoin"]+"/"+e.Detail["step"])
	}
	want := []string{"r1/remove", "r1/move", "r1/move", "r2/move"}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
}
