// Package dbfile rewrites a stopped member's backend file (member/snap/db)
// without its free pages: etcd's own offline defragmentation
// (etcdutl defrag --data-dir), with etcd's own backend code.
package dbfile

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Result is what one rewrite did.
type Result struct {
	// Before and After are the file's sizes; InUse the bytes its pages
	// in use take after (what etcd reports as dbSizeInUse).
	Before, After, InUse int64
	Took                 time.Duration
}

// lockWait is how long the rewrite waits for the db's file lock: a
// running etcd holds it, and the rewrite must never wait on one.
const lockWait = 5 * time.Second

// Defragment rewrites the db file of the member whose data dir is
// dataDir, which no etcd may run on. It is etcd's backend.Defrag, as
// `etcdutl defrag --data-dir` calls it: the keys are copied into a
// temporary file next to the db (db.tmp.*, fsynced as bbolt commits),
// which is renamed over the db only once complete. Cut short at any
// point (an error, a kill), the db is the old one, whole; a temporary
// file left by a kill is removed before etcd starts again
// (etcdproc.RemoveDefragTemps). A data dir without a db is an error,
// never a new empty db.
func Defragment(lg *zap.Logger, dataDir string) (r Result, err error) {
	path := datadir.ToBackendFileName(dataDir)
	st, err := os.Stat(path)
	if err != nil {
		return r, fmt.Errorf("offline defragmentation: %w", err)
	}
	if !st.Mode().IsRegular() {
		return r, fmt.Errorf("offline defragmentation: %s is not a regular file", path)
	}
	r.Before = st.Size()
	// etcd's backend panics when it cannot open the db and logs Fatal
	// (os.Exit) when it cannot close or rename it: both panic here, and
	// come back as an error. The old db is whole either way.
	// Its own progress lines (and bbolt's transactions) repeat the
	// caller's: only its warnings and errors are worth a line.
	lg = lg.Named("etcd-backend").WithOptions(zap.WithFatalHook(zapcore.WriteThenPanic), zap.IncreaseLevel(zapcore.WarnLevel))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("offline defragmentation of %s: etcd's backend gave up: %v", path, p)
		}
	}()
	start := time.Now()
	b := backend.NewDefaultBackend(lg, path, backend.WithTimeout(lockWait))
	derr := b.Defrag()
	r.InUse = b.SizeInUse()
	cerr := b.Close()
	r.Took = time.Since(start)
	if err := errors.Join(derr, cerr); err != nil {
		return r, fmt.Errorf("offline defragmentation of %s: %w", path, err)
	}
	if st, err = os.Stat(path); err != nil {
		return r, fmt.Errorf("offline defragmentation: %w", err)
	}
	r.After = st.Size()
	return r, nil
}
