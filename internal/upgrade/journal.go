package upgrade

import (
	"fmt"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
)

// FileName is the journal's file in the state dir.
const FileName = "upgrade.json"

// Journal is the restart onto a new binary, written by the old process
// before it stops etcd, so that a process killed between any two steps
// leaves the new one knowing what was under way:
//
//	journal written → etcd stopped → exec → (new process) lock resumed →
//	etcd started → caught-up healthy voter → journal closed, lock released
//
// or, when only the agent restarts (model.Restart.AgentOnly), etcd is not
// stopped but handed over (Etcd): the new process adopts it before
// anything else, and finds it a caught-up voter at its first pass. Killed
// after the journal, the old process's etcd ends with it (its lifeline):
// the new one finds nothing to adopt and starts etcd as after any crash.
//
// Killed before the journal: systemd (Restart=on-failure) starts the new
// binary, which starts its member as any restarted agent does. Killed
// after it: the new process finds it open, resumes the lock from Lease if
// it still lives, and finishes the step. The lease (cluster.LockTTL)
// outlives an exec by far; if it ran out anyway, the next host's agent
// still waits: its rule wants the others a quorum of caught-up voters, and
// this member counts only once it has caught up.
type Journal struct {
	From model.Build `json:"from"`
	To   model.Build `json:"to"`
	// Lease is the cluster lock's lease the old process held (0: none,
	// a one-member cluster).
	Lease int64     `json:"lease,omitempty"`
	At    time.Time `json:"at"`
	// Done is when the new process found its member a caught-up healthy
	// voter and closed the journal (zero: open).
	Done time.Time `json:"done,omitzero"`
	// Etcd is the running etcd the old process handed to the new one
	// (model.Restart.AgentOnly: it was not stopped), and Settings and
	// Trust what it read when it started (the agent's settings and the
	// CAs its trust files held); nil: etcd was stopped.
	Etcd     *etcdproc.Handoff `json:"etcd,omitempty"`
	Settings string            `json:"settings,omitempty"`
	Trust    []string          `json:"trust,omitempty"`
}

// Open: the restart is under way.
func (j *Journal) Open() bool { return j != nil && !j.At.IsZero() && j.Done.IsZero() }

// Save writes j durably (temp file, fsync, rename, fsync of the dir).
func Save(path string, j Journal) error {
	if err := statefile.Save(path, j); err != nil {
		return fmt.Errorf("write the upgrade journal: %w", err)
	}
	return nil
}

// Load reads the journal; nil when there is none.
func Load(path string) (*Journal, error) {
	var j Journal
	found, err := statefile.Load(path, &j)
	if err != nil {
		return nil, fmt.Errorf("read the upgrade journal: %w", err)
	}
	if !found {
		return nil, nil
	}
	return &j, nil
}
