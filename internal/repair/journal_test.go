package repair

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
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

// Crash safety: a process killed in the middle of a journal save (the
// new content half written to its temp file) leaves the old journal in
// place, and the next save works. The crash is real: a child process
// (this test binary) dies with os.Exit in the middle of the write, with
// no deferred cleanup.
func TestJournalCrashLeavesOldContent(t *testing.T) {
	if path := os.Getenv("JOURNAL_CRASH_PATH"); path != "" {
		data, _ := json.Marshal(sampleJournal("move"))
		_ = atomicfile.Write(path, 0o600, func(w io.Writer) error {
			_, _ = w.Write(data[:len(data)/2])
			os.Exit(7) // killed mid-write
			return nil
		})
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.json")
	if err := SaveJournal(path, sampleJournal("snapshot")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJournalCrashLeavesOldContent$")
	cmd.Env = append(os.Environ(), "JOURNAL_CRASH_PATH="+path)
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("the child did not die mid-write: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) < 2 {
		t.Fatalf("no half-written temp file next to the journal (%v): the crash happened elsewhere, the test proves nothing", left)
	}
	got, _, err := LoadJournal(path)
	if err != nil || got.Step != "snapshot" {
		t.Fatalf("after a crashed save: %+v, %v; want the old journal", got, err)
	}
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
