package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Step is a step of the rejoin journal.
type Step string

// The rejoin journal's steps, in order. Each is idempotent: a resumed
// rejoin skips what its journal says is done, and the cluster calls treat
// an already-made change as success.
const (
	StepPrecheck Step = "precheck" // the data dir can be moved aside
	StepSnapshot Step = "snapshot" // a safety snapshot of the keyspace is kept
	StepRemove   Step = "remove"   // this host's stale entry is removed
	StepMove     Step = "move"     // the unusable data dir is moved aside
	StepAdd      Step = "add"      // this host is a learner (or took over its unstarted entry)
	StepStart    Step = "start"    // etcd is started to join
	StepPromote  Step = "promote"  // waiting for the learner's promotion
	StepDone     Step = "done"
)

// Steps are the journal's steps in order, for progress reports.
var Steps = []Step{StepPrecheck, StepSnapshot, StepRemove, StepMove, StepAdd, StepStart, StepPromote}

// Number is the step's place in Steps (1-based; 0 when not listed).
func (s Step) Number() int {
	for i, x := range Steps {
		if x == s {
			return i + 1
		}
	}
	return 0
}

// Cluster is what a rejoin asks of the live cluster.
type Cluster interface {
	// Remove removes member id from cluster clusterID (gone already is
	// success, when that cluster confirms it).
	Remove(ctx context.Context, clusterID, id uint64) error
	// AddLearner adds a learner and returns it with the member list that
	// includes it.
	AddLearner(ctx context.Context, peerURLs []string) (model.Member, []model.Member, error)
	SaveSnapshot(ctx context.Context, endpoint, path string) (int64, error)
}

// Host is what a rejoin does on this host.
type Host interface {
	// CheckMoveAside proves that the data dir can be moved aside.
	CheckMoveAside() error
	// MoveAside moves the data dir aside (kept, never deleted) and
	// returns where it went ("" when there was nothing to move).
	MoveAside() (string, error)
	// CheckFree refuses when the filesystem holding dir would keep less
	// than the spec's minimum free space after need more bytes.
	CheckFree(dir string, need int64) error
	// StartJoin starts etcd to join the cluster as member id, with the
	// cluster's current members.
	StartJoin(members []model.Member, id uint64) error
}

// Journals keeps the rejoin journal.
type Journals interface {
	Load() (Journal, error)
	Save(Journal) error
}

// Lock is the cluster lock the rejoin holds.
type Lock interface {
	// Fence proves, asked of the cluster, that the lock is still ours and
	// stays ours for one call, and returns the context to make that call
	// with (it expires before the lock could): right before each
	// membership change (etcd's membership calls cannot be made
	// conditional in a txn).
	Fence(ctx context.Context) (context.Context, context.CancelFunc, error)
	// Kept reports, after a membership change, whether the lock's lease
	// lived through it (an error: it could not tell).
	Kept(ctx context.Context) (bool, error)
	Release(ctx context.Context)
}

// errLockLost stops a rejoin whose lock expired (a long step, a
// partition, a pause of this process): another agent may hold it and
// change the membership.
var errLockLost = errors.New("the cluster lock is not provably ours: not changing the membership")

// fence is the lock's fence before a membership change.
func (r *Rejoin) fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	fenced, cancel, err := r.Lock.Fence(ctx)
	if err != nil {
		return ctx, cancel, fmt.Errorf("%w: %w", errLockLost, err)
	}
	return fenced, cancel, nil
}

// lockKept says loudly when the lock's lease ran out while a membership
// change was under way: the change is made (and journaled), but another
// agent may have changed the membership at the same time.
func (r *Rejoin) lockKept(ctx context.Context, change string) {
	switch kept, err := r.Lock.Kept(ctx); {
	case err == nil && !kept:
		r.Log.Error("the cluster lock was lost during a membership change: another agent may have changed the membership at the same time; check the member list",
			zap.String("change", change), zap.Error(err))
	case err != nil:
		r.Log.Warn("could not confirm the cluster lock after a membership change", zap.String("change", change), zap.Error(err))
	}
}

// Plan is what the start decision asked of the rejoin, with the cluster
// it observed.
type Plan struct {
	// ClusterID is the cluster the rejoin was decided on.
	ClusterID uint64
	Reason    string
	Repair    bool   // replaces unusable data: counts against the rate limit
	MoveData  bool   // a non-empty data dir must be moved aside first
	StaleID   uint64 // this host's entry to remove before adding it again
	ReuseID   uint64 // an unstarted entry with our peer URLs to take over
	PeerURLs  []string
	// Members is the cluster's member list as observed; Leader the member
	// a safety snapshot is taken from.
	Members []model.Member
	Leader  model.Member
}

// Rejoin runs the one rejoin path step by step, journaling each step so
// that an agent killed between any two resumes where it stopped.
type Rejoin struct {
	Cluster  Cluster
	Host     Host
	Journals Journals
	Lock     Lock
	Log      *zap.Logger
	// SnapshotDir receives the safety snapshot; Snapshot turns it on.
	SnapshotDir string
	Snapshot    bool
	// BackupDir receives the moved-aside data dir.
	BackupDir string
	// Reuse, when set, offers a verified scheduled snapshot of the cluster
	// clusterID (the plan's) young enough to stand for the safety snapshot
	// (repair.snapshotMaxAge): the repair then transfers nothing before it
	// starts.
	Reuse func(clusterID uint64) (path string, ok bool)
	// Changed is told of each membership change made ("remove",
	// "add-learner"), with the member changed and the journal, for
	// metrics and the history.
	Changed func(kind string, memberID uint64, j Journal)
	// CrashAt, for tests, is called right before each side effect.
	CrashAt func(Step)
	Now     func() time.Time
}

func (r *Rejoin) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Rejoin) crash(s Step) {
	if r.CrashAt != nil {
		r.CrashAt(s)
	}
}

// crashAfter is the test crash point right after step's side effect and
// before its journal write ("after-remove"): the window in which the
// world has changed and the journal does not know it yet.
func (r *Rejoin) crashAfter(s Step) { r.crash("after-" + s) }

func (r *Rejoin) changed(kind string, memberID uint64, j Journal) {
	if r.Changed != nil {
		r.Changed(kind, memberID, j)
	}
}

// Run resumes the open journal or opens one, then runs every step up to
// starting etcd. On any error it records it in the journal (when it can)
// and gives the cluster lock back: the journal keeps the progress, and the
// step that failed may need another agent to act first (etcd refuses adds
// while a voter is down; that voter's own repair needs the lock).
func (r *Rejoin) Run(ctx context.Context, p Plan) (Journal, error) {
	j, err := r.open(p)
	if err != nil {
		r.Lock.Release(ctx)
		return j, err
	}
	steps := []func(context.Context, *Journal, Plan) error{r.precheck, r.snapshot, r.remove, r.move, r.addAndStart}
	for _, step := range steps {
		if err := step(ctx, &j, p); err != nil {
			j.Error = err.Error()
			_ = r.Journals.Save(j)
			r.Lock.Release(ctx)
			return j, fmt.Errorf("rejoin step %s: %w", nextStep(j.Step), err)
		}
	}
	return j, nil
}

// nextStep is the step that follows done, the one that failed.
func nextStep(done Step) Step { return done.Next() }

// Next is the step that follows s in Steps (s itself when none does):
// the step a journal at s runs next, and so the one that failed when a
// run stopped there.
func (s Step) Next() Step {
	if n := s.Number(); n > 0 && n < len(Steps) {
		return Steps[n]
	}
	return s
}

// open resumes the open journal or starts a new one.
func (r *Rejoin) open(p Plan) (Journal, error) {
	j, err := r.Journals.Load()
	if err != nil {
		return j, fmt.Errorf("rejoin journal: %w", err)
	}
	if j.Open() {
		r.Log.Info("rejoin resumed", zap.String("id", j.ID), zap.String("step", string(j.Step)))
		return j, nil
	}
	now := r.now()
	j = Journal{ID: r.newID(now, j.ID), Reason: p.Reason, Step: StepPrecheck,
		StartedAt: now, UpdatedAt: now, Attempts: j.Attempts, Class: "join"}
	if p.Repair {
		j.Class = "repair"
	}
	r.Log.Warn("rejoin started", zap.String("id", j.ID), zap.String("kind", j.Class), zap.String("reason", p.Reason))
	if err := r.Journals.Save(j); err != nil {
		return j, fmt.Errorf("rejoin journal: %w", err)
	}
	return j, nil
}

// journalIDStamp is the UTC time to the nanosecond, fixed width so that
// IDs (and snapshot names) sort by time.
const journalIDStamp = "20060102T150405.000000000Z"

// newID names a new journal, and so its safety snapshot
// SnapshotDir/<ID>.db. Two repairs within the clock's resolution, or a
// clock stepped back, would reuse a time: the suffix -2, -3, ... is added
// until the name differs from the previous journal's and no snapshot of
// that name exists, so an older snapshot is never overwritten.
func (r *Rejoin) newID(now time.Time, prev string) string {
	base := now.UTC().Format(journalIDStamp)
	id := base
	for n := 2; id == prev || r.snapshotExists(id+".db"); n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	return id
}

// snapshotPath is where the snapshot step writes: SnapshotDir/<ID>.db, or,
// if a file of that name exists after all (a journal from an agent that
// named IDs by the second), the first free <ID>-N.db.
func (r *Rejoin) snapshotPath(id string) string {
	name := id + ".db"
	for n := 2; r.snapshotExists(name); n++ {
		name = fmt.Sprintf("%s-%d.db", id, n)
	}
	return filepath.Join(r.SnapshotDir, name)
}

// snapshotExists: anything at SnapshotDir/name. (A dir that cannot be
// read makes the snapshot itself fail.)
func (r *Rejoin) snapshotExists(name string) bool {
	_, err := os.Lstat(filepath.Join(r.SnapshotDir, name))
	return err == nil
}

// advance records that step is done.
func (r *Rejoin) advance(j *Journal, step Step, f ...zap.Field) error {
	j.Step, j.UpdatedAt, j.Error = step, r.now(), ""
	if err := r.Journals.Save(*j); err != nil {
		return fmt.Errorf("rejoin journal: %w", err)
	}
	r.Log.Info("rejoin step", append([]zap.Field{zap.String("id", j.ID), zap.String("step", string(step))}, f...)...)
	return nil
}

// precheck proves that the data can be moved aside before anything
// changes: a repair that removed the member and then could not move its
// data would stop half-way.
func (r *Rejoin) precheck(_ context.Context, _ *Journal, p Plan) error {
	if !p.MoveData {
		return nil
	}
	return r.Host.CheckMoveAside()
}

// snapshot keeps a snapshot of the cluster's keyspace from the leader
// before anything is changed: the last line of defence if the repair goes
// wrong.
func (r *Rejoin) snapshot(ctx context.Context, j *Journal, p Plan) error {
	if !p.Repair || j.SnapshotPath != "" || !r.Snapshot {
		return nil
	}
	if r.Reuse != nil {
		if path, ok := r.Reuse(p.ClusterID); ok {
			j.SnapshotPath = path
			return r.advance(j, StepSnapshot, zap.String("path", path), zap.Bool("reused", true))
		}
	}
	if p.Leader.ID == 0 || len(p.Leader.ClientURLs) == 0 {
		return fmt.Errorf("no leader to take a snapshot from")
	}
	if err := r.Host.CheckFree(r.SnapshotDir, p.Leader.DBSize); err != nil {
		return err
	}
	r.crash(StepSnapshot)
	path := r.snapshotPath(j.ID)
	n, err := r.Cluster.SaveSnapshot(ctx, p.Leader.ClientURLs[0], path)
	if err != nil {
		return err
	}
	r.crashAfter(StepSnapshot)
	j.SnapshotPath = path
	return r.advance(j, StepSnapshot, zap.String("path", path), zap.Int64("bytes", n), zap.String("from", p.Leader.Name))
}

// remove removes this host's stale entry: remove before add, since etcd
// refuses adds while a voter is down.
func (r *Rejoin) remove(ctx context.Context, j *Journal, p Plan) error {
	if p.StaleID == 0 {
		return nil
	}
	fenced, cancel, err := r.fence(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	r.crash(StepRemove)
	if err := r.Cluster.Remove(fenced, p.ClusterID, p.StaleID); err != nil {
		return err
	}
	r.lockKept(ctx, "remove")
	r.crashAfter(StepRemove)
	r.changed("remove", p.StaleID, *j)
	j.OldMemberID = p.StaleID
	return r.advance(j, StepRemove, zap.String("removed", fmt.Sprintf("%x", p.StaleID)))
}

// move moves the unusable data dir aside, on its own filesystem; it is
// kept, never deleted.
func (r *Rejoin) move(_ context.Context, j *Journal, p Plan) error {
	if !p.MoveData {
		return nil
	}
	if err := r.Host.CheckFree(r.BackupDir, 0); err != nil {
		return err
	}
	r.crash(StepMove)
	dest, err := r.Host.MoveAside()
	if err != nil {
		return err
	}
	r.crashAfter(StepMove)
	if dest != "" {
		j.BackupPath = dest
	}
	return r.advance(j, StepMove, zap.String("to", dest))
}

// addAndStart adds this host as a learner (or takes over an unstarted
// entry with its peer URLs) and starts etcd to join with the member list
// the cluster returned.
func (r *Rejoin) addAndStart(ctx context.Context, j *Journal, p Plan) error {
	id, members := p.ReuseID, p.Members
	if id == 0 {
		fenced, cancel, err := r.fence(ctx)
		defer cancel()
		if err != nil {
			return err
		}
		r.crash(StepAdd)
		m, all, err := r.Cluster.AddLearner(fenced, p.PeerURLs)
		if err != nil {
			return err
		}
		r.lockKept(ctx, "add-learner")
		id, members = m.ID, all
		r.crashAfter(StepAdd)
		r.changed("add-learner", m.ID, *j)
		// Every add counts toward repair.maxPerHour, whatever started the
		// rejoin: a learner removed as stale and added again, over and
		// over, is a loop too.
		j.Attempts = append(j.Attempts, r.now())
	}
	j.NewMemberID = id
	if err := r.advance(j, StepAdd, zap.String("member-id", fmt.Sprintf("%x", id)), zap.Bool("reused", p.ReuseID != 0)); err != nil {
		return err
	}
	r.crash(StepStart)
	if err := r.Host.StartJoin(members, id); err != nil {
		return err
	}
	r.crashAfter(StepStart)
	return r.advance(j, StepPromote)
}

// Finish closes an open journal once the member is a healthy voter. It
// returns the closed journal, and false when there was none to close.
func (r *Rejoin) Finish(newID uint64) (Journal, bool, error) {
	j, err := r.Journals.Load()
	if err != nil {
		return j, false, fmt.Errorf("rejoin journal: %w", err)
	}
	if !j.Open() {
		return j, false, nil
	}
	took := r.now().Sub(j.StartedAt)
	if err := r.advance(&j, StepDone, zap.String("member-id", fmt.Sprintf("%x", newID)), zap.Duration("took", took.Round(time.Millisecond))); err != nil {
		return j, false, err
	}
	r.Log.Warn("rejoin finished: member is a healthy voter", zap.String("id", j.ID), zap.String("kind", j.Class),
		zap.String("old-member-id", fmt.Sprintf("%x", j.OldMemberID)), zap.String("new-member-id", fmt.Sprintf("%x", newID)),
		zap.String("backup", j.BackupPath), zap.Duration("took", took.Round(time.Millisecond)))
	return j, true, nil
}
