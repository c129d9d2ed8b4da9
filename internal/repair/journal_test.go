package repair

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

func sampleJournal(step Step) Journal {
	t0 := time.Date(2026, 11, 29, 19, 58, 53, 745923000, time.UTC)
	return Journal{
		ID: "20261129T195853Z", Reason: "WAL is corrupt", Class: "corrupt", Step: step,
		StartedAt: t0, UpdatedAt: t0.Add(time.Second),
		OldMemberID: math.MaxUint64, NewMemberID: 0x8e9e05c52164694d, // exact above 2^53
		BackupPath: "/var/lib/etcd.backups/x", SnapshotPath: "/var/lib/etcdkeeper/s.db",
		Attempts: []time.Time{t0.Add(-time.Hour), t0},
	}
}

func TestJournalRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "journal.json")
	if _, exists, err := LoadJournal(path); exists || err != nil {
		t.Fatalf("LoadJournal of nothing = %v, %v; want false, nil", exists, err)
	}
	want := sampleJournal("remove")
	if err := SaveJournal(path, want); err != nil {
		t.Fatal(err)
	}
	got, exists, err := LoadJournal(path)
	if err != nil || !exists || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadJournal = %+v, %v, %v; want %+v", got, exists, err, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", st.Mode().Perm())
	}
}

// A journal that does not parse may hide a repair under way: it exists.
func TestLoadJournalGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.json")
	os.WriteFile(path, []byte(`{"id": "x", "step": `), 0o600)
	if _, exists, err := LoadJournal(path); !exists || err == nil {
		t.Fatalf("LoadJournal(garbage) = %v, %v; want true and an error", exists, err)
	}
}

// Crash safety: a crash during a save leaves at most a temp file next to
// the journal, which readers never see; the journal keeps the old content.
func TestJournalCrashLeavesOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.json")
	old := sampleJournal("snapshot")
	if err := SaveJournal(path, old); err != nil {
		t.Fatal(err)
	}
	// What a crash between write and rename leaves: a half-written temp file.
	if err := os.WriteFile(filepath.Join(dir, ".journal.json123456"), []byte(`{"step": "mo`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadJournal(path)
	if err != nil || got.Step != "snapshot" {
		t.Fatalf("after a crashed save: %+v, %v; want the old journal", got, err)
	}
	// The next save still works and replaces the journal as a whole.
	if err := SaveJournal(path, sampleJournal("move")); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := LoadJournal(path); got.Step != "move" {
		t.Fatalf("after the next save: step %q, want move", got.Step)
	}
}

// Readers racing a writer see a whole old or a whole new journal, never a
// partial one.
func TestJournalReadersSeeWholeVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.json")
	steps := append(slices.Clone(Steps), StepDone)
	if err := SaveJournal(path, sampleJournal(steps[0])); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range 200 {
			if err := SaveJournal(path, sampleJournal(steps[i%len(steps)])); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			wg.Wait()
			return
		default:
		}
		j, exists, err := LoadJournal(path)
		if err != nil || !exists {
			t.Fatalf("read %d: %v, exists %v", reads, err, exists)
		}
		want := sampleJournal(j.Step)
		if !reflect.DeepEqual(j, want) {
			t.Fatalf("read %d: partial journal %+v", reads, j)
		}
	}
}
