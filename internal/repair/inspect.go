package repair

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"syscall"

	"go.uber.org/zap"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/datadir"
)

// DirState is the verdict of an offline look at an etcd data dir.
type DirState int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=DirState -linecomment
const (
	// DirMissing: the data dir does not exist.
	DirMissing DirState = iota // missing
	// DirEmpty: no member/wal/*.wal; etcd will bootstrap (or join) afresh.
	DirEmpty // empty
	// DirHealthy: the WAL and db pass etcd's own checks.
	DirHealthy // healthy
	// DirTornTail: healthy except for a torn last WAL record, which etcd
	// truncates itself on start (storage/wal/repair.go). Not corrupt.
	DirTornTail // torn-tail
	// DirLocked: a process (a running etcd) holds the db lock; nothing was
	// checked. Not corrupt.
	DirLocked // locked
	// DirUnreadable: the check could not read the dir: permission denied,
	// the disk or file system failed (EIO, ESTALE, ENOTCONN), or the
	// checker ran out of file descriptors or memory (EMFILE, ENFILE,
	// ENOMEM, mmap). Not corrupt: none of these may lead to moving data
	// (field-notes §3); a new data dir would not fix them.
	DirUnreadable // unreadable
	// DirCorrupt: etcd cannot start on this dir; repair by rejoining.
	DirCorrupt // corrupt
)

// Report is the result of Inspect.
type Report struct {
	State  DirState
	Reason string
	// ClusterID and MemberID come from the WAL metadata record
	// (etcdserverpb.Metadata); 0 when it could not be read.
	ClusterID, MemberID uint64
	// DBSize is the size of member/snap/db in bytes (0 if missing).
	DBSize int64
	// SnapshotIndex is the newest committed snapshot record in the WAL, where
	// etcd starts replaying; ConsistentIndex is the last index applied to the db.
	SnapshotIndex, ConsistentIndex uint64
	// Term and CommitIndex are the WAL's newest raft hard state, LastIndex
	// its last entry, and Revision the db's newest revision: how far this
	// member's data goes, for choosing a recovery source.
	Term, CommitIndex, LastIndex uint64
	Revision                     int64
	// Members are the member IDs the db's membership lists (learners
	// too); nil when the db was not read. A source's forced start is
	// recognised by it (reconcile's forcedTook).
	Members []uint64
}

// errLocked marks a data dir in use by another process.
var errLocked = errors.New("data dir is in use")

// Inspect checks an etcd data dir offline, with etcd's own WAL reader and
// bbolt, the way etcd's bootstrap (etcdserver/bootstrap.go) reads it. It
// never writes to the dir. lg may be nil.
func Inspect(lg *zap.Logger, dataDir string) Report {
	if lg == nil {
		lg = zap.NewNop()
	}
	r, err := inspect(lg, dataDir)
	if err != nil {
		r.State, r.Reason = stateOf(err), err.Error()
	}
	return r
}

// stateOf maps the error that ended an inspection to a state: anything
// that is not about the data itself is DirLocked or DirUnreadable, and only
// the rest is DirCorrupt.
func stateOf(err error) DirState {
	switch {
	case errors.Is(err, errLocked):
		return DirLocked
	case cannotRead(err):
		return DirUnreadable
	}
	return DirCorrupt
}

// unreadableErrnos are the errors of the host, not of the data: access,
// the disk or file system, and the checker's own file descriptors and
// memory.
var unreadableErrnos = []error{
	fs.ErrPermission, // EACCES, EPERM
	syscall.EROFS,
	syscall.EIO, syscall.ESTALE, syscall.ENOTCONN,
	syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM,
}

// cannotRead: err is one of unreadableErrnos, or its text says so where a
// library formatted the errno away (bbolt's "mmap allocate error: %s");
// the texts are those of the classifier's environment rules.
func cannotRead(err error) bool {
	if slices.ContainsFunc(unreadableErrnos, func(e error) bool { return errors.Is(err, e) }) {
		return true
	}
	s := err.Error()
	return accessRule.matchesErr(s) || unreadableRule.matchesErr(s) || exhaustedRule.matchesErr(s)
}

func inspect(lg *zap.Logger, dataDir string) (Report, error) {
	var r Report
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		r.State, r.Reason = DirMissing, "data dir does not exist"
		return r, nil
	} else if err != nil {
		return r, fmt.Errorf("stat data dir: %w", err)
	}
	// The db's lock first: it tells whether etcd is running, and a running
	// etcd appends to the WAL while we would read it. With the lock held,
	// the WAL is read before the db: a WAL that proves the data corrupt
	// (the common case: "walpb: crc mismatch"), or a db that has applied
	// more than the WAL holds (dbAhead), spares the db's read-through and
	// bbolt's walk, all of the time on a large db (about a second for
	// 1.1 GB).
	walDir := datadir.ToWALDir(dataDir)
	dbPath := datadir.ToBackendFileName(dataDir)
	var (
		w      walFacts
		walErr error
		hasWAL bool
	)
	db, err := inspectDB(dbPath, func() error {
		names, err := walFileNames(walDir)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && len(names) == 0) {
			return nil
		}
		hasWAL = true
		if err != nil {
			walErr = err
			return err
		}
		if w, walErr = inspectWAL(lg, walDir); walErr == nil {
			walErr = dbAhead(dbPath, w)
		}
		return walErr
	})
	r.DBSize, r.ConsistentIndex, r.Revision, r.Members = db.size, db.consistentIndex, db.revision, db.members
	r.ClusterID, r.MemberID, r.SnapshotIndex = w.clusterID, w.memberID, w.snapshotIndex
	r.Term, r.CommitIndex, r.LastIndex = w.term, w.commit, w.lastIndex
	if err != nil {
		return r, err
	}
	if !hasWAL {
		r.State, r.Reason = DirEmpty, "no WAL files"
		return r, checkNoStaleDB(db)
	}
	if walErr != nil {
		return r, walErr
	}
	return checkMember(lg, dataDir, db, w, r)
}

// checkMember checks the db of a data dir against its readable WAL.
func checkMember(lg *zap.Logger, dataDir string, db dbFacts, w walFacts, r Report) (Report, error) {
	if err := checkDBMatchesWAL(lg, datadir.ToSnapDir(dataDir), db, w); err != nil {
		return r, err
	}
	r.State, r.Reason = DirHealthy, "WAL and database pass etcd's checks"
	if w.torn != "" {
		r.State, r.Reason = DirTornTail, w.torn
	}
	return r, nil
}

// checkNoStaleDB: without *.wal files etcd bootstraps a new member
// (wal.Exist in bootstrap.go) but keeps an existing db. A db left by a
// failed first start (etcd creates it before the WAL, e.g. before "member
// count is unequal") has applied nothing and is harmless. One that has
// applied entries makes the new member skip its first raft entries: etcd
// serves peers but never becomes ready (checked with v3.7.3).
func checkNoStaleDB(db dbFacts) error {
	if db.consistentIndex == 0 {
		return nil
	}
	return fmt.Errorf("member/snap/db has applied entries up to index %d but there is no WAL: etcd would start a new member on this db and never become ready",
		db.consistentIndex)
}

// checkDBMatchesWAL applies etcd's rules that relate the db to the WAL.
func checkDBMatchesWAL(lg *zap.Logger, snapDir string, db dbFacts, w walFacts) error {
	if err := checkSnapshotCovered(lg, snapDir, w.snapshotIndex, db); err != nil {
		return err
	}
	return checkDBNotAhead(db, w)
}

// checkDBNotAhead: the db must not have applied entries the WAL no longer
// has. If it has, the WAL lost entries (e.g. etcd cut the last file at a
// damaged record it took for a torn write): etcd then starts, re-proposes
// those indexes, skips applying them because the db is past them, and never
// becomes ready (checked with v3.7.3). etcd's own verifier
// (server/verify/verify.go, only with ETCD_VERIFY) compares against the last
// HardState commit instead, which a genuine torn tail can leave one batch
// behind the entries: etcd starts fine then, so entries are what we compare.
func checkDBNotAhead(db dbFacts, w walFacts) error {
	if db.consistentIndex > w.lastIndex {
		return fmt.Errorf("database applied up to index %d but the WAL ends at index %d: the WAL lost entries, etcd would never become ready",
			db.consistentIndex, w.lastIndex)
	}
	return nil
}

// dbAhead is checkDBNotAhead on the db's consistent index alone, read
// without the read-through and the walk (its meta page and one key): a db
// that has applied entries the WAL no longer has is corrupt data whatever
// its other pages hold. A db that cannot be read that way, or is not
// ahead, is left to the full check (nil).
func dbAhead(path string, w walFacts) error {
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return nil
	}
	var index uint64
	if err := safely("reading the database", func() error {
		var err error
		index, _, _, err = checkDB(path, st.Size(), false)
		return err
	}); err != nil {
		return nil
	}
	return checkDBNotAhead(dbFacts{consistentIndex: index}, w)
}

// checkSnapshotCovered mirrors recoverSnapshot in etcdserver/bootstrap.go:
// when the newest WAL snapshot is newer than the db's consistent index, etcd
// swaps in member/snap/<index>.snap.db (a snapshot received from the leader)
// and panics without it ("failed to find database snapshot file"). A missing
// or zero-length db counts as consistent index 0: etcd creates an empty one,
// which is fine only if the WAL still starts at index 0.
func checkSnapshotCovered(lg *zap.Logger, snapDir string, snapIndex uint64, db dbFacts) error {
	if snapIndex <= db.consistentIndex {
		return nil
	}
	if _, err := snap.New(lg, snapDir).DBFilePath(snapIndex); err == nil {
		return nil
	}
	if !db.exists || db.size == 0 {
		return fmt.Errorf("database %s is missing or empty and the WAL starts at snapshot index %d: etcd cannot rebuild it",
			filepath.Join(snapDir, "db"), snapIndex)
	}
	return fmt.Errorf("database (consistent index %d) is older than the WAL snapshot (index %d) and no %016x.snap.db exists",
		db.consistentIndex, snapIndex, snapIndex)
}

// safely runs f, turning a panic into an error: etcd's WAL code panics on
// some malformed input, and bbolt on damaged pages. SetPanicOnFault turns a
// fault on bbolt's mmap in this goroutine into a panic too.
func safely(what string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", what, r)
		}
	}()
	return f()
}

// InspectWAL reads only the WAL of dataDir: the identity and how far the
// raft log goes, without the db, which a running etcd keeps locked. The
// state is DirHealthy when etcd's reader gets through it (the WAL of a
// member that runs has passed etcd's own start), DirEmpty without WAL
// files, DirCorrupt otherwise.
func InspectWAL(lg *zap.Logger, dataDir string) Report {
	if lg == nil {
		lg = zap.NewNop()
	}
	var r Report
	names, err := walFileNames(datadir.ToWALDir(dataDir))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(names) == 0) {
		r.State, r.Reason = DirEmpty, "no WAL files"
		return r
	}
	if err != nil {
		r.State, r.Reason = stateOf(err), err.Error()
		return r
	}
	w, err := inspectWAL(lg, datadir.ToWALDir(dataDir))
	r.ClusterID, r.MemberID, r.SnapshotIndex = w.clusterID, w.memberID, w.snapshotIndex
	r.Term, r.CommitIndex, r.LastIndex = w.term, w.commit, w.lastIndex
	if err != nil {
		r.State, r.Reason = stateOf(err), err.Error()
		return r
	}
	r.State, r.Reason = DirHealthy, "the WAL passes etcd's checks (the db is in use by the running etcd)"
	return r
}
