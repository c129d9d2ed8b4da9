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
)

// The files in agent.stateDir.
const (
	markerFile  = "member.json" // proof that this host was a member
	journalFile = "rejoin.json" // the rejoin/repair journal
)

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
	return atomicfile.WriteFile(a.statePath(markerFile), append(b, '\n'), 0o600)
}

func (a *Agent) loadJournal() (repair.Journal, error) {
	j, _, err := repair.LoadJournal(a.statePath(journalFile))
	if err != nil {
		return repair.Journal{}, fmt.Errorf("rejoin journal: %w", err)
	}
	return j, nil
}

func (a *Agent) saveJournal(j repair.Journal) error {
	if err := repair.SaveJournal(a.statePath(journalFile), j); err != nil {
		return fmt.Errorf("rejoin journal: %w", err)
	}
	a.updateStatus(func(s *Status) { s.RejoinStep = string(j.Step) })
	return nil
}
