package repair

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"go.etcd.io/etcd/server/v3/storage/schema"
)

// dbLockTimeout bounds the wait for bbolt's file lock. A running etcd holds
// it exclusively for its whole life, so waiting longer tells nothing more.
var dbLockTimeout = 500 * time.Millisecond

// dbFacts is what Inspect learns from member/snap/db.
type dbFacts struct {
	exists          bool
	size            int64
	consistentIndex uint64
	// revision is the newest revision in the key bucket (0: none).
	revision int64
	// members are the member IDs the members bucket lists (nil: none
	// read).
	members []uint64
}

// inspectDB opens the db read-only (a shared flock: it fails while etcd
// holds its exclusive one), reads it through, and walks every page with
// bbolt's tx.Check. Before that, with the lock held (no etcd can start
// and append to the WAL), it runs before: when before proves the data
// corrupt (a WAL that fails its CRC is corruption, whatever the disk
// would say about the db), the read-through and the walk, all of the
// time on a large db, are skipped: only the consistent index and the
// revision are read, and before's error is returned. before runs
// whenever inspectDB returns no error: also when there is no db, or an
// empty one (nothing to lock then), and not when the db cannot be
// locked. nil runs nothing.
func inspectDB(path string, before func() error) (dbFacts, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return dbFacts{}, runBefore(before)
	}
	if err != nil {
		return dbFacts{}, fmt.Errorf("database: %w", err)
	}
	f := dbFacts{exists: true, size: st.Size()}
	if f.size == 0 {
		// bbolt initialises a zero-length file like a missing one.
		return f, runBefore(before)
	}
	file, err := os.Open(path)
	if err != nil {
		return f, fmt.Errorf("database: %w", err)
	}
	defer file.Close()
	if err := lockShared(file, dbLockTimeout); err != nil {
		return f, fmt.Errorf("database %s: %w", path, err)
	}
	if beforeErr := runBefore(before); beforeErr != nil && stateOf(beforeErr) == DirCorrupt {
		// How far the db went still counts (a recovery plan shows what a
		// corrupt member held): its index and revision, a few pages.
		// Whether the rest of it reads adds nothing to the WAL's proof.
		_ = safely("reading the database", func() error {
			var err error
			f.consistentIndex, f.revision, f.members, err = checkDB(path, f.size, false)
			return err
		})
		return f, beforeErr
	}
	if err := readThrough(file); err != nil {
		return f, fmt.Errorf("database: reading %s: %w", path, err)
	}
	err = safely("checking the database", func() error {
		var err error
		f.consistentIndex, f.revision, f.members, err = checkDB(path, f.size, true)
		return err
	})
	return f, err
}

func runBefore(before func() error) error {
	if before == nil {
		return nil
	}
	return before()
}

// lockShared takes the shared flock that bbolt takes read-only, so that a
// running etcd (which holds it exclusively) is found before the db is read.
// Closing file releases it.
func lockShared(file *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(file.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: locked by another process (a running etcd?)", errLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readThrough reads the whole file with read(2) before bbolt maps it. A
// disk error on a mapped page is a SIGBUS, which kills the checker inside
// bbolt exactly like a damaged page does (and the crash reads as
// corruption); read(2) returns it as EIO, which stateOf maps to
// DirUnreadable. The pages read stay in the page cache for bbolt.
func readThrough(file *os.File) error {
	buf := make([]byte, 1<<20)
	for {
		_, err := file.Read(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// checkDB opens the db read-only, walks every page when walk is set, and
// reads its consistent index and newest revision.
func checkDB(path string, size int64, walk bool) (index uint64, rev int64, members []uint64, err error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: dbLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return 0, 0, nil, fmt.Errorf("%w: %s is locked by another process (a running etcd?)", errLocked, path)
	}
	if err != nil {
		// etcd panics with "failed to open database" on the same errors
		// (storage/backend/backend.go).
		return 0, 0, nil, fmt.Errorf("failed to open database %s: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if !walk {
			if want := tx.Size(); size < want {
				return fmt.Errorf("database is truncated: %d bytes, its meta page needs %d", size, want)
			}
		} else if err := checkPages(tx, size); err != nil {
			return err
		}
		index, rev, members = readConsistentIndex(tx), readRevision(tx), readMembers(tx)
		return nil
	})
	return index, rev, members, err
}

// readMembers lists the member IDs of the members bucket, as etcd's
// membership store keeps them (schema.BackendMemberKey: the ID in hex),
// in the bucket's order; nil when the bucket is missing. Learners count:
// they are members a forced start would drop too.
func readMembers(tx *bolt.Tx) []uint64 {
	b := tx.Bucket(schema.Members.Name())
	if b == nil {
		return nil
	}
	ids := []uint64{}
	_ = b.ForEach(func(k, _ []byte) error {
		if id, err := strconv.ParseUint(string(k), 16, 64); err == nil {
			ids = append(ids, id)
		}
		return nil
	})
	return ids
}

// readRevision is the newest revision in the key bucket: its keys are
// revisions, big-endian main revision first (mvcc's revToBytes), so the
// last key is the newest (0 when the bucket is empty or missing).
func readRevision(tx *bolt.Tx) int64 {
	b := tx.Bucket(schema.Key.Name())
	if b == nil {
		return 0
	}
	k, _ := b.Cursor().Last()
	if len(k) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k[:8]))
}

// checkPages runs bbolt's consistency check. A file shorter than the
// meta page's high-water mark is refused first: reading those pages would
// fault on the mmap inside tx.Check's own goroutine, which no recover (and
// no SetPanicOnFault here) can catch.
func checkPages(tx *bolt.Tx, size int64) error {
	if want := tx.Size(); size < want {
		return fmt.Errorf("database is truncated: %d bytes, its meta page needs %d", size, want)
	}
	var first error
	n := 0
	for err := range tx.Check() { // drain: Check's goroutine blocks otherwise
		if first == nil {
			first = err
		}
		n++
	}
	if first != nil {
		return fmt.Errorf("database: bbolt check found %d problem(s), first: %w", n, first)
	}
	return nil
}

// readConsistentIndex reads what schema.UnsafeReadConsistentIndex reads:
// the last raft index applied to the db (meta bucket, big-endian uint64;
// 0 when absent).
func readConsistentIndex(tx *bolt.Tx) uint64 {
	b := tx.Bucket(schema.Meta.Name())
	if b == nil {
		return 0
	}
	v := b.Get(schema.MetaConsistentIndexKeyName)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
