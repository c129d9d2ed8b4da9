package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// fakeWorld records every call a rejoin makes, in order, and fails the
// call named in failOn. It stands in for the cluster, the host, the
// journal file and the lock, so that the sequencing is tested in
// milliseconds; test/integration runs the same path against real etcd.
type fakeWorld struct {
	calls    []string
	failOn   string
	journal  Journal
	saved    []Step
	released int
	// writeSnapshots: SaveSnapshot writes "snapshot N" to its path, the
	// way the real one renames a finished file there.
	writeSnapshots bool
	snapshots      int
}

func (f *fakeWorld) call(name string) error {
	f.calls = append(f.calls, name)
	if f.failOn == name {
		return fmt.Errorf("%s failed (injected)", name)
	}
	return nil
}

func (f *fakeWorld) Remove(context.Context, uint64, uint64) error { return f.call("remove") }
func (f *fakeWorld) AddLearner(context.Context, []string) (model.Member, []model.Member, error) {
	if err := f.call("add"); err != nil {
		return model.Member{}, nil, err
	}
	m := model.Member{ID: 0x99, PeerURLs: []string{"http://127.0.0.2:2380"}, IsLearner: true}
	return m, []model.Member{{ID: 1, Name: "node1"}, m}, nil
}
func (f *fakeWorld) SaveSnapshot(_ context.Context, _, path string) (int64, error) {
	if err := f.call("snapshot"); err != nil {
		return 0, err
	}
	if f.writeSnapshots {
		f.snapshots++
		if err := os.WriteFile(path, fmt.Appendf(nil, "snapshot %d", f.snapshots), 0o600); err != nil {
			return 0, err
		}
	}
	return 42, nil
}
func (f *fakeWorld) CheckMoveAside() error               { return f.call("check-move") }
func (f *fakeWorld) MoveAside() (string, error)          { return "/backups/x", f.call("move") }
func (f *fakeWorld) CheckFree(dir string, _ int64) error { return f.call("check-free " + dir) }
func (f *fakeWorld) StartJoin(ms []model.Member, id uint64) error {
	return f.call(fmt.Sprintf("start %x with %d members", id, len(ms)))
}
func (f *fakeWorld) Load() (Journal, error) {
	if f.failOn == "load" {
		return Journal{}, errors.New("journal does not parse (injected)")
	}
	return f.journal, nil
}
func (f *fakeWorld) Save(j Journal) error {
	if f.failOn == "save "+string(j.Step) {
		return errors.New("no space left on device (injected)")
	}
	f.journal = j
	f.saved = append(f.saved, j.Step)
	return nil
}
func (f *fakeWorld) Release(context.Context) { f.released++ }
func (f *fakeWorld) Fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return ctx, func() {}, f.call("lock-check")
}
func (f *fakeWorld) Kept(context.Context) (bool, error) {
	// "lock-kept" failing stands for a lease found gone.
	return f.call("lock-kept") == nil, nil
}

func newRejoin(f *fakeWorld) *Rejoin {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return &Rejoin{Cluster: f, Host: f, Journals: f, Lock: f, Log: zap.NewNop(), SnapshotDir: "/snaps", BackupDir: "/backups",
		Snapshot: true, Now: func() time.Time { return t0 }}
}

var repairPlan = Plan{Reason: "data is corrupt", Repair: true, MoveData: true, StaleID: 0x2, PeerURLs: []string{"http://127.0.0.2:2380"},
	Members: []model.Member{{ID: 1, Name: "node1"}, {ID: 2, Name: "node2"}}, Leader: model.Member{ID: 1, Name: "node1", ClientURLs: []string{"http://127.0.0.1:2379"}}}

// TestRejoinStepOrder: a repair checks before it changes anything, takes
// the snapshot before the remove, removes before it adds, and moves the
// data before etcd starts.
func TestRejoinStepOrder(t *testing.T) {
	f := &fakeWorld{}
	j, err := newRejoin(f).Run(context.Background(), repairPlan)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"check-move", "check-free /snaps", "snapshot", "lock-check", "remove", "lock-kept", "check-free /backups", "move", "lock-check", "add", "lock-kept", "start 99 with 2 members"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls:\n %s\nwant\n %s", strings.Join(f.calls, ", "), strings.Join(want, ", "))
	}
	wantSaved := []Step{StepPrecheck, StepSnapshot, StepRemove, StepMove, StepAdd, StepPromote}
	if !slices.Equal(f.saved, wantSaved) {
		t.Errorf("journal steps %v, want %v", f.saved, wantSaved)
	}
	if j.Class != "repair" || j.OldMemberID != 2 || j.NewMemberID != 0x99 || j.BackupPath != "/backups/x" || j.SnapshotPath != "/snaps/"+j.ID+".db" || len(j.Attempts) != 1 {
		t.Errorf("journal = %+v", j)
	}
	if f.released != 0 {
		t.Errorf("the lock was released by a rejoin that succeeded: it is held until promotion")
	}
}

// TestRejoinJoinReusesUnstarted: a plain join of an empty data dir moves
// nothing, takes no snapshot, and takes over an unstarted entry instead
// of adding another.
func TestRejoinJoinReusesUnstarted(t *testing.T) {
	f := &fakeWorld{}
	p := Plan{Reason: "joining", ReuseID: 0x7, Members: repairPlan.Members}
	j, err := newRejoin(f).Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start 7 with 2 members"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	if j.Class != "join" || len(j.Attempts) != 0 {
		t.Errorf("a join counted as a repair: %+v", j)
	}
}

// TestRejoinResumes: an agent killed after each journaled step resumes
// with the steps after it and never repeats a membership change.
func TestRejoinResumes(t *testing.T) {
	// stopAfter[step] is the failure that stops a first run right after
	// step was journaled.
	stopAfter := map[Step]string{StepPrecheck: "save snapshot", StepSnapshot: "save remove", StepRemove: "save move",
		StepMove: "save add", StepAdd: "start 99 with 2 members"}
	after := map[Step][]string{
		StepPrecheck: {"check-move", "check-free /snaps", "snapshot", "lock-check", "remove", "lock-kept", "check-free /backups", "move", "lock-check", "add", "lock-kept", "start 99 with 2 members"},
		StepSnapshot: {"check-move", "lock-check", "remove", "lock-kept", "check-free /backups", "move", "lock-check", "add", "lock-kept", "start 99 with 2 members"},
		StepRemove:   {"check-move", "check-free /backups", "move", "lock-check", "add", "lock-kept", "start 99 with 2 members"},
		StepMove:     {"lock-check", "add", "lock-kept", "start 99 with 2 members"},
		StepAdd:      {"start 99 with 2 members"},
	}
	for step, want := range after {
		t.Run(string(step), func(t *testing.T) {
			// The first run stops right after step was journaled.
			f := &fakeWorld{failOn: stopAfter[step]}
			if _, err := newRejoin(f).Run(context.Background(), repairPlan); err == nil {
				t.Fatal("the injected failure did not stop the first run")
			}
			if f.journal.Step != step {
				t.Fatalf("journal at %s after the first run, want %s", f.journal.Step, step)
			}
			// The resumed run is planned from the world as it is now: the
			// stale entry is gone once the remove was journaled, the data
			// dir is empty once the move was.
			p := repairPlan
			if step.Number() >= StepRemove.Number() {
				p.StaleID = 0
			}
			if step.Number() >= StepMove.Number() {
				p.MoveData = false
			}
			f.calls, f.failOn = nil, ""
			if step.Number() >= StepAdd.Number() {
				f.journal.NewMemberID = 0x99
				p.ReuseID = 0x99
			}
			if _, err := newRejoin(f).Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.calls, want) {
				t.Errorf("resumed calls:\n %s\nwant\n %s", strings.Join(f.calls, ", "), strings.Join(want, ", "))
			}
			if f.journal.Step != StepPromote || len(f.journal.Attempts) != 1 {
				t.Errorf("resumed journal = %+v; want at promote with one attempt counted", f.journal)
			}
		})
	}
}

// TestRejoinReleasesLockOnEveryError: whatever step fails — the journal
// unreadable, a save hitting ENOSPC, any cluster or host call — the
// cluster lock is given back, and nothing after the failure runs.
func TestRejoinReleasesLockOnEveryError(t *testing.T) {
	failures := []string{"load", "save precheck", "check-move", "check-free /snaps", "snapshot", "save snapshot", "lock-check", "remove", "save remove",
		"check-free /backups", "move", "save move", "add", "save add", "start 99 with 2 members", "save promote"}
	for _, fail := range failures {
		t.Run(fail, func(t *testing.T) {
			f := &fakeWorld{failOn: fail}
			_, err := newRejoin(f).Run(context.Background(), repairPlan)
			if err == nil {
				t.Fatalf("no error with %q failing", fail)
			}
			if f.released != 1 {
				t.Errorf("lock released %d times after %q failed, want once", f.released, fail)
			}
			if n := len(f.calls); n > 0 && !strings.HasPrefix(fail, "save") && fail != "load" && f.calls[n-1] != fail {
				t.Errorf("calls went on after %q failed: %v", fail, f.calls)
			}
		})
	}
}

// TestRejoinCrashPoints: the test hook fires right before each side
// effect and right after it (before its journal write), so that
// integration tests can kill the agent in both windows.
func TestRejoinCrashPoints(t *testing.T) {
	f := &fakeWorld{}
	r := newRejoin(f)
	var at []Step
	r.CrashAt = func(s Step) { at = append(at, s) }
	if _, err := r.Run(context.Background(), repairPlan); err != nil {
		t.Fatal(err)
	}
	want := []Step{StepSnapshot, "after-snapshot", StepRemove, "after-remove", StepMove, "after-move", StepAdd, "after-add", StepStart, "after-start"}
	if !slices.Equal(at, want) {
		t.Errorf("crash points %v, want %v", at, want)
	}
}

// TestRejoinNeverOverwritesASnapshot: each repair's safety snapshot is
// named by its journal ID; a second repair within the same second, at the
// same instant (a coarse or pinned clock), or after the clock was stepped
// back, must keep the first one's snapshot and get an ID of its own.
func TestRejoinNeverOverwritesASnapshot(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 500_000_000, time.UTC)
	for _, tt := range []struct {
		name          string
		first, second time.Time
	}{
		{"same instant", t0, t0},
		{"same second", t0, t0.Add(300 * time.Millisecond)},
		{"clock stepped back", t0, t0.Add(-400 * time.Millisecond)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeWorld{writeSnapshots: true}
			dir := t.TempDir()
			var ids, paths []string
			for _, now := range []time.Time{tt.first, tt.second} {
				r := newRejoin(f)
				r.SnapshotDir, r.Now = dir, func() time.Time { return now }
				j, err := r.Run(context.Background(), repairPlan)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := r.Finish(0x99); err != nil {
					t.Fatal(err)
				}
				ids, paths = append(ids, j.ID), append(paths, j.SnapshotPath)
			}
			if ids[0] == ids[1] || paths[0] == paths[1] {
				t.Fatalf("two repairs got journal IDs %q and snapshots %q", ids, paths)
			}
			for i, p := range paths {
				if got, err := os.ReadFile(p); err != nil || string(got) != fmt.Sprintf("snapshot %d", i+1) {
					t.Errorf("snapshot %d at %s holds %q (%v), want its own", i+1, p, got, err)
				}
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*.db")); len(files) != 2 {
				t.Errorf("snapshots in the dir: %v, want both", files)
			}
		})
	}
}

// TestRejoinSnapshotNameTaken: a journal resumed with an ID whose
// snapshot name is taken (IDs were once the time to the second) writes
// next to the old snapshot, not over it.
func TestRejoinSnapshotNameTaken(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "20261130T120000Z.db")
	if err := os.WriteFile(old, []byte("older repair"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeWorld{writeSnapshots: true, journal: Journal{ID: "20261130T120000Z", Step: StepPrecheck, Class: "repair"}}
	r := newRejoin(f)
	r.SnapshotDir = dir
	j, err := r.Run(context.Background(), repairPlan)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(old); string(got) != "older repair" || j.SnapshotPath != filepath.Join(dir, "20261130T120000Z-2.db") {
		t.Errorf("older snapshot holds %q, new one at %s", got, j.SnapshotPath)
	}
}

// TestRejoinIDsDifferWithoutSnapshots: without snapshots two repairs at
// the same instant still get different journal IDs.
func TestRejoinIDsDifferWithoutSnapshots(t *testing.T) {
	f := &fakeWorld{}
	r := newRejoin(f)
	r.Snapshot = false
	var ids []string
	for range 2 {
		j, err := r.Run(context.Background(), repairPlan)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Finish(0x99); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("journal IDs %q", ids)
	}
}

func TestRejoinFinish(t *testing.T) {
	f := &fakeWorld{journal: Journal{ID: "x", Step: StepPromote, Class: "repair"}}
	j, closed, err := newRejoin(f).Finish(0x99)
	if err != nil || !closed || j.Step != StepDone || f.journal.Step != StepDone {
		t.Fatalf("Finish = %+v, %v, %v", j, closed, err)
	}
	if _, closed, _ := newRejoin(f).Finish(0x99); closed {
		t.Errorf("a closed journal was closed again")
	}
}

// TestRejoinCountsEveryAdd: each add counts toward the rate limit, also a
// join's and a resumed rejoin's; a rejoin that takes over its unstarted
// entry adds nothing and counts nothing.
func TestRejoinCountsEveryAdd(t *testing.T) {
	f := &fakeWorld{}
	join := Plan{Reason: "joining", Members: repairPlan.Members, PeerURLs: repairPlan.PeerURLs}
	for i := 1; i <= 3; i++ {
		j, err := newRejoin(f).Run(context.Background(), join)
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Attempts) != i {
			t.Fatalf("after join %d: %d attempts counted", i, len(j.Attempts))
		}
		// The learner was removed as stale before it was promoted: the
		// journal stays open and the next pass adds it again.
	}
	reuse := join
	reuse.ReuseID = 0x99
	if j, _ := newRejoin(f).Run(context.Background(), reuse); len(j.Attempts) != 3 {
		t.Errorf("taking over an unstarted entry counted an attempt: %d", len(j.Attempts))
	}
}

// TestRejoinReusesRecentSnapshot: with a verified scheduled snapshot young
// enough at hand, the repair keeps that one as its safety snapshot instead
// of transferring the keyspace again.
func TestRejoinReusesRecentSnapshot(t *testing.T) {
	f := &fakeWorld{}
	r := newRejoin(f)
	r.Reuse = func(uint64) (string, bool) { return "/backups/c-20261130T115900Z-rev42.db", true }
	j, err := r.Run(context.Background(), repairPlan)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.calls, "snapshot") || slices.Contains(f.calls, "check-free /snaps") {
		t.Errorf("a fresh snapshot was taken although a recent one was at hand: %v", f.calls)
	}
	if j.SnapshotPath != "/backups/c-20261130T115900Z-rev42.db" || !slices.Contains(f.saved, StepSnapshot) {
		t.Errorf("journal snapshot %q, steps %v: the reused snapshot is not journaled", j.SnapshotPath, f.saved)
	}
	// None recent enough: a fresh one, as before.
	f2 := &fakeWorld{}
	r2 := newRejoin(f2)
	r2.Reuse = func(uint64) (string, bool) { return "", false }
	if _, err := r2.Run(context.Background(), repairPlan); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f2.calls, "snapshot") {
		t.Errorf("no snapshot taken when none was recent enough: %v", f2.calls)
	}
}
