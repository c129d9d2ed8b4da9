package repair

import (
	"fmt"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
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
	exists, err = statefile.Load(path, &j)
	if err != nil {
		return Journal{}, exists, fmt.Errorf("journal: %w", err)
	}
	return j, exists, nil
}

// SaveJournal writes j to path atomically (package statefile), creating
// the directory if needed.
func SaveJournal(path string, j Journal) error { return statefile.Save(path, j) }
