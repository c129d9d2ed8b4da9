package agent

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestMaintenanceEndSparesARunningGuard: maintenance end (TurnDone
// without the wish's ID) does not end the turn of a guard that runs, nor
// withdraw the wish it waits on: it is refused, naming the guard, unless
// forced. The guard's own call, a guard that is gone, and a maintenance
// wish are ended as before. The "guard" is a real process.
func TestMaintenanceEndSparesARunningGuard(t *testing.T) {
	tests := []struct {
		name     string
		kind     model.TurnKind
		granted  bool
		gone     bool // the guard's process has exited
		own      bool // the guard asks, with its wish's ID
		force    bool
		refused  string // "": not refused
		wantDone bool   // the wish is left marked done (false: withdrawn, or refused)
	}{
		{name: "maintenance end, a running guard holds the turn: refused", kind: model.TurnGuard, granted: true, refused: "holds this host's turn: guard: sleep 1000 (pid "},
		{name: "maintenance end, a running guard waits for the turn: refused", kind: model.TurnGuard, refused: "waits for this host's turn: guard: sleep 1000 (pid "},
		{name: "maintenance end --force, a running guard holds the turn: ended", kind: model.TurnGuard, granted: true, force: true, wantDone: true},
		{name: "the guard itself: its work done", kind: model.TurnGuard, granted: true, own: true, wantDone: true},
		{name: "maintenance end, the guard is gone: ended", kind: model.TurnGuard, granted: true, gone: true, wantDone: true},
		{name: "maintenance end of a maintenance: ended", kind: model.TurnMaintenance, granted: true, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stateAgent(t)
			guard := exec.Command("sleep", "1000")
			if err := guard.Start(); err != nil {
				t.Skipf("no sleep to play the guard: %v", err)
			}
			t.Cleanup(func() { _ = guard.Process.Kill(); _ = guard.Wait() })
			w := model.TurnWish{ID: "w1", Kind: tt.kind, Why: string(tt.kind) + ": sleep 1000", By: "root@node1"}
			if tt.kind == model.TurnGuard {
				w.PID = guard.Process.Pid
			}
			if _, err := a.WishTurn(w); err != nil {
				t.Fatal(err)
			}
			if tt.granted {
				got := a.loadWish()
				got.Granted = true
				if err := a.saveWish(got); err != nil {
					t.Fatal(err)
				}
			}
			if tt.gone {
				_ = guard.Process.Kill()
				_ = guard.Wait()
			}
			id := ""
			if tt.own {
				id = w.ID
			}
			_, err := a.TurnDone(id, tt.force)
			left := a.loadWish()
			if tt.refused != "" {
				if !errors.Is(err, ErrTurnGuarded) || !a.TurnConflict(err) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("TurnDone = %v, want refused (ErrTurnGuarded, a conflict) saying %q", err, tt.refused)
				}
				if left == nil || left.Done {
					t.Fatalf("refused, but the wish is %+v", left)
				}
				return
			}
			if err != nil {
				t.Fatalf("TurnDone = %v, want done", err)
			}
			if done := left != nil && left.Done; done != tt.wantDone {
				t.Errorf("the wish after TurnDone: %+v, want done %v", left, tt.wantDone)
			}
		})
	}
}
