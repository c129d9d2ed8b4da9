// Package recovery is the way back from a lost quorum (etcdkeeper
// recover): what each agent reports about its member's data, which member
// a recovery should start from and what it would lose, when a recovery is
// refused, and the journal each agent keeps of its part in one.
//
// A recovery has one source and fences every other host:
//   - the source's agent restarts its etcd from its own data as a
//     one-member cluster (--force-new-cluster: every other member and
//     learner dropped, its member ID and every key kept), or, from a
//     snapshot, moves its data dir aside and restores the snapshot as a
//     new one-member cluster with its revision bumped past the snapshot's;
//   - every other agent stops its old member and never starts it again;
//     once the recovered cluster answers, it rejoins it through the
//     ordinary rejoin path (data moved aside, added as a learner,
//     promoted), one at a time under the cluster lock.
//
// Each agent journals its part (recovery.json in its state dir), so that
// a kill at any step resumes; the recovered cluster keeps a record of the
// recovery, so that a host that was off during it rejoins when it comes
// back.
package recovery

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
)

// Role is a host's part in a recovery.
type Role string

const (
	// RoleSource: the member the cluster is recovered from.
	RoleSource Role = "source"
	// RoleFenced: every other member: stopped, never started as it was,
	// rejoins the recovered cluster.
	RoleFenced Role = "fenced"
)

// Step is a journaled step of a host's part in a recovery.
type Step string

const (
	// StepRequested: the request is journaled; nothing changed yet.
	StepRequested Step = "requested"
	// StepStopped: the source's old etcd is stopped.
	StepStopped Step = "stopped"
	// StepMoved: (from a snapshot) the source's data dir is moved aside.
	StepMoved Step = "moved"
	// StepRestored: (from a snapshot) the snapshot is restored into the
	// data dir as a new one-member cluster.
	StepRestored Step = "restored"
	// StepForced: the source's etcd was started as a one-member cluster
	// (--force-new-cluster, or on the restored data).
	StepForced Step = "forced"
	// StepLed: the source's forced start took: its member led the
	// recovered cluster. Never forced again; the record in the recovered
	// cluster and the end of the journal may still be missing.
	StepLed Step = "led"
	// StepFenced: this host's old member is stopped for good; it rejoins
	// the recovered cluster when that answers.
	StepFenced Step = "fenced"
	// StepDone: the source serves as the leader of the recovered cluster,
	// or this fenced host's member is a voter of it.
	StepDone Step = "done"
	// StepRefused: the agent refused the request (a quorum of voters is
	// healthy, the source's data is not usable); nothing was changed.
	StepRefused Step = "refused"
	// StepAborted: a fenced host's part was called off (the source refused
	// or could not be reached): its member runs as before.
	StepAborted Step = "aborted"
)

// validID is what a recovery ID may be: it names a scratch dir.
var validID = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,63}$`)

// Request is what `recover --yes` asks of one agent.
type Request struct {
	// ID names one recovery on every host.
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Source is the member the cluster is recovered from.
	Source string `json:"source"`
	// OldClusterID is the cluster that lost its quorum, as the caller saw
	// it (0: not known).
	OldClusterID uint64 `json:"oldClusterID,omitempty"`
	// Abort calls off a fenced host's part in recovery ID.
	Abort bool `json:"abort,omitempty"`
	// Snapshot, for the source only, is a snapshot file on its host to
	// recover from instead of its data dir; RevisionBump is how far the
	// restored revision is moved past the snapshot's.
	Snapshot     string `json:"snapshot,omitempty"`
	RevisionBump uint64 `json:"revisionBump,omitempty"`
}

// Check says what is wrong with a request, or nil.
func (r Request) Check() error {
	switch {
	case r.ID == "":
		return errors.New("no recovery id")
	case !validID.MatchString(r.ID):
		return fmt.Errorf("recovery id %q: use letters, digits, '.', '_' and '-' (at most 64)", r.ID)
	case r.Source == "":
		return errors.New("no source member")
	case r.Role != RoleSource && r.Role != RoleFenced:
		return fmt.Errorf("role %q: want %q or %q", r.Role, RoleSource, RoleFenced)
	case r.Snapshot != "" && r.Role != RoleSource:
		return errors.New("only the source restores a snapshot")
	}
	return nil
}

// Journal is one host's part in a recovery, kept in its state dir.
type Journal struct {
	Request
	Step      Step      `json:"step"`
	StartedAt time.Time `json:"startedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// OldMemberID is this host's member when the request arrived (0:
	// none): a fenced host never starts it again.
	OldMemberID uint64 `json:"oldMemberID,omitempty"`
	// ClusterID and MemberID are the recovered cluster and, on the source,
	// its member, once known.
	ClusterID uint64 `json:"clusterID,omitempty"`
	MemberID  uint64 `json:"memberID,omitempty"`
	// Aside is where the source's data dir went (from a snapshot).
	Aside string `json:"aside,omitempty"`
	// ForcedFrom are the members the source's data listed when it was
	// forced: once its data lists others, the forced start took.
	ForcedFrom []uint64 `json:"forcedFrom,omitempty"`
	// Error is why the request was refused.
	Error string `json:"error,omitempty"`
}

// Open: the recovery is under way on this host (neither done nor
// refused).
func (j Journal) Open() bool { return model.Recovery{Step: string(j.Step)}.Open() }

// Load reads the journal at path; a missing file is a zero Journal.
func Load(path string) (Journal, error) {
	var j Journal
	if _, err := statefile.Load(path, &j); err != nil {
		return Journal{}, fmt.Errorf("recovery journal: %w", err)
	}
	return j, nil
}

// Save writes j to path atomically.
func Save(path string, j Journal) error {
	j.UpdatedAt = time.Now().UTC()
	if err := statefile.Save(path, j); err != nil {
		return fmt.Errorf("recovery journal: %w", err)
	}
	return nil
}

// Accept turns a request into the journal an agent saves, given the
// journal it has (cur) and its member now (oldMember): a repeated request
// of the recovery under way is the same journal; another recovery while
// one is under way is refused.
func Accept(cur Journal, r Request, oldMember uint64, now time.Time) (Journal, error) {
	if err := r.Check(); err != nil {
		return cur, err
	}
	if r.Abort {
		if cur.ID != r.ID || cur.Role != RoleFenced || !cur.Open() {
			return cur, fmt.Errorf("no fence of recovery %s under way here to call off", r.ID)
		}
		cur.Step = StepAborted
		return cur, nil
	}
	if cur.Open() {
		if cur.ID == r.ID && cur.Role == r.Role {
			return cur, nil
		}
		return cur, fmt.Errorf("recovery %s is under way here (%s, step %s): one at a time", cur.ID, cur.Role, cur.Step)
	}
	if cur.ID == r.ID && cur.Step == StepDone {
		return cur, nil // already done: nothing to do again
	}
	step := StepRequested
	if r.Role == RoleFenced {
		step = StepFenced
	}
	return Journal{Request: r, Step: step, StartedAt: now.UTC(), OldMemberID: oldMember}, nil
}
