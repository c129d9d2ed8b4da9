package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Journal is the persisted state of one repair, so that an agent that
// crashes or restarts in the middle resumes the same repair at its step
// instead of starting another (member remove/add are not idempotent).
type Journal struct {
	ID           string    `json:"id"`
	Reason       string    `json:"reason"`
	Class        string    `json:"class"`
	Step         Step      `json:"step"`
	StartedAt    time.Time `json:"startedAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	OldMemberID  uint64    `json:"oldMemberID"`
	NewMemberID  uint64    `json:"newMemberID"`
	BackupPath   string    `json:"backupPath"`
	SnapshotPath string    `json:"snapshotPath"`
	// Attempts are recent repair start times, for RateLimited.
	Attempts []time.Time `json:"attempts"`
	Error    string      `json:"error,omitempty"`
}

// Open: a rejoin is under way (started and not done).
func (j Journal) Open() bool { return j.Step != "" && j.Step != StepDone }

// LoadJournal reads the journal at path. exists is false (and err nil) when
// there is none. A journal that does not parse is reported with exists
// true: a repair may be under way, so the caller must not start another.
func LoadJournal(path string) (j Journal, exists bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Journal{}, false, nil
	}
	if err != nil {
		return Journal{}, false, fmt.Errorf("read journal: %w", err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return Journal{}, true, fmt.Errorf("journal %s does not parse: %w", path, err)
	}
	return j, true, nil
}

// SaveJournal writes j to path atomically (see WriteFileAtomic), creating
// the directory if needed.
func SaveJournal(path string, j Journal) error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("journal dir: %w", err)
	}
	return WriteFileAtomic(path, append(data, '\n'), 0o600)
}

// WriteFileAtomic replaces path with data so that after a crash path holds
// either the old or the new content, never a mix: write a temp file in the
// same directory (rename is only atomic within one filesystem), fsync it,
// rename it over path, fsync the directory so the rename itself is durable.
// A crash can leave a ".<name>.tmp-*" file behind; nothing reads it.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := writeSynced(f, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes renames into or out of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
