package agent

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
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
	return a.noteWrite(suspectFile, statefile.Save(a.statePath(suspectFile), s))
}

// loadSuspect is the verdict on the data of member id, or nil.
func (a *Agent) loadSuspect(id uint64) *suspect {
	var s suspect
	if found, err := statefile.Load(a.statePath(suspectFile), &s); !found || err != nil || s.MemberID != id || id == 0 {
		return nil
	}
	return &s
}

// clearSuspect forgets the verdict once the data it was about is moved
// aside.
func (a *Agent) clearSuspect() {
	if err := statefile.Remove(a.statePath(suspectFile)); err != nil {
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
	var m model.Marker
	found, err := statefile.Load(a.statePath(markerFile), &m)
	if err != nil {
		return nil, fmt.Errorf("marker: %w", err)
	}
	if !found {
		return nil, nil
	}
	return &m, nil
}

func (a *Agent) saveMarker(m model.Marker) error {
	return a.noteWrite(markerFile, statefile.Save(a.statePath(markerFile), m))
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
