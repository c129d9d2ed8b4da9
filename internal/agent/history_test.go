package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
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
