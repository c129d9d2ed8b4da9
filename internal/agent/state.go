package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"go.uber.org/zap"
)

// The files in agent.stateDir.
const (
	markerFile  = "member.json"  // proof that this host was a member
	journalFile = "rejoin.json"  // the rejoin/repair journal
	suspectFile = "corrupt.json" // etcd found this member's data corrupt: repair it, never start it as is
)

// suspect is etcd's own verdict on the local data (a CORRUPT alarm, a
// hash mismatch with its peers) that the offline data-dir check cannot
// see. It is kept on disk so that an agent restarted before the repair
// moved the data aside does not start the member as it is.
type suspect struct {
	MemberID uint64 `json:"memberID"`
	Reason   string `json:"reason"`
}

func (a *Agent) saveSuspect(s suspect) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode %s: %w", suspectFile, err)
	}
	return a.noteWrite(suspectFile, atomicfile.WriteFile(a.statePath(suspectFile), append(b, '\n'), 0o600))
}

// loadSuspect is the verdict on the data of member id, or nil.
func (a *Agent) loadSuspect(id uint64) *suspect {
	b, err := os.ReadFile(a.statePath(suspectFile))
	if err != nil {
		return nil
	}
	var s suspect
	if json.Unmarshal(b, &s) != nil || s.MemberID != id || id == 0 {
		return nil
	}
	return &s
}

// clearSuspect forgets the verdict once the data it was about is moved
// aside.
func (a *Agent) clearSuspect() {
	if err := os.Remove(a.statePath(suspectFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.lg.Warn("clear "+suspectFile, zap.Error(err))
		return
	}
	// A verdict that could not be kept is no longer needed either.
	_ = a.noteWrite(suspectFile, nil)
}

func (a *Agent) statePath(name string) string {
	_, self := a.Spec()
	return filepath.Join(self.StateDir, name)
}

func (a *Agent) loadMarker() (*model.Marker, error) {
	b, err := os.ReadFile(a.statePath(markerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read marker: %w", err)
	}
	var m model.Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse marker %s: %w", a.statePath(markerFile), err)
	}
	return &m, nil
}

func (a *Agent) saveMarker(m model.Marker) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode marker: %w", err)
	}
	return a.noteWrite(markerFile, atomicfile.WriteFile(a.statePath(markerFile), append(b, '\n'), 0o600))
}

func (a *Agent) loadJournal() (repair.Journal, error) {
	j, _, err := repair.LoadJournal(a.statePath(journalFile))
	if err != nil {
		return repair.Journal{}, fmt.Errorf("rejoin journal: %w", err)
	}
	return j, nil
}

func (a *Agent) saveJournal(j repair.Journal) error {
	if err := a.noteWrite(journalFile, repair.SaveJournal(a.statePath(journalFile), j)); err != nil {
		return fmt.Errorf("rejoin journal: %w", err)
	}
	a.updateStatus(func(s *Status) { s.RejoinStep = string(j.Step) })
	return nil
}
