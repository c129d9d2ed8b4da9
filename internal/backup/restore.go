package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// RestoreCheck is the result of restoring a snapshot into a throwaway
// data dir and comparing what etcd would serve from it with the
// snapshot's verification.
type RestoreCheck struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Seconds float64   `json:"seconds"`
	// What etcd's key-value store reads from the restored data dir: its
	// revision and key count, and the hash of its key bucket after it
	// finished a pending compaction.
	Revision int64  `json:"revision"`
	Keys     int64  `json:"keys"`
	KVHash   uint32 `json:"kvHash"`
	Error    string `json:"error,omitempty"`
}

// restoreMember is the name and peer URL the restored data dir is made
// for. Nothing ever listens on it: the check starts no server (a served
// copy of the keyspace on a port is readable by every local user).
const (
	restoreMember = "restore-check"
	restorePeer   = "http://restore-check.invalid:2380"
)

// CheckRestore restores the snapshot e with etcdutl's restore code into a
// throwaway data dir (0700) next to it and checks that dir offline, with
// no server and no listener: etcd's bootstrap checks (repair.Inspect: the
// WAL, its snapshot record, the db's consistent index), then etcd's own
// key-value store opened on the restored db for the revision and key
// count it would serve, and the hash of the key bucket; all compared with
// e's verification. The result is also written into e's sidecar.
func CheckRestore(ctx context.Context, e Entry) RestoreCheck {
	start := time.Now()
	rc := RestoreCheck{At: start.UTC()}
	err := checkRestore(ctx, e, &rc)
	rc.OK = err == nil
	if err != nil {
		rc.Error = err.Error()
	}
	rc.Seconds = time.Since(start).Seconds()
	if e.Sidecar != nil {
		sc := *e.Sidecar
		sc.RestoreCheck = &rc
		if werr := writeSidecar(filepath.Join(e.Dir, SidecarName(e.File)), &sc); werr != nil && rc.OK {
			rc.OK, rc.Error = false, werr.Error()
		}
	}
	return rc
}

func checkRestore(ctx context.Context, e Entry, rc *RestoreCheck) error {
	if !e.Verified() {
		return errors.New("the snapshot is not verified")
	}
	want := e.Sidecar.Verification
	if sum, _, _, err := fileSums(e.Path()); err != nil {
		return err
	} else if sum != e.Sidecar.SHA256 {
		return fmt.Errorf("the file's sha256 %s is not the one its sidecar records (%s): it changed since it was verified", sum, e.Sidecar.SHA256)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restore check: %w", err)
	}
	tmp, err := os.MkdirTemp(e.Dir, restorePrefix+"*")
	if err != nil {
		return fmt.Errorf("restore dir: %w", err)
	}
	defer removeRestoreDir(tmp)
	// MkdirTemp makes it 0700; said again, since a copy of the keyspace
	// goes in it.
	if err := os.Chmod(tmp, 0o700); err != nil {
		return fmt.Errorf("restore dir: %w", err)
	}
	dataDir := filepath.Join(tmp, "data")
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: e.Path(), Name: restoreMember, OutputDataDir: dataDir,
		PeerURLs: []string{restorePeer}, InitialCluster: restoreMember + "=" + restorePeer, InitialClusterToken: restoreMember,
	}); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if r := repair.Inspect(nil, dataDir); r.State != repair.DirHealthy {
		return fmt.Errorf("the restored data dir would not start: %s: %s", r.State, r.Reason)
	}
	db := filepath.Join(dataDir, "member", "snap", "db")
	if rc.Revision, rc.Keys, err = readStore(ctx, db); err != nil {
		return fmt.Errorf("the restored db: %w", err)
	}
	if rc.KVHash, _, err = kvHash(db); err != nil {
		return fmt.Errorf("the restored db: %w", err)
	}
	if diffs := compareRestored(*rc, want); len(diffs) > 0 {
		return fmt.Errorf("the restored data differs: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// compareRestored lists how what the restored data holds differs from
// what the snapshot's verification found.
func compareRestored(rc RestoreCheck, want Verification) []string {
	var diffs []string
	if rc.Revision != want.Revision {
		diffs = append(diffs, fmt.Sprintf("revision %d, the snapshot's is %d", rc.Revision, want.Revision))
	}
	if rc.Keys != int64(want.TotalKey) {
		diffs = append(diffs, fmt.Sprintf("%d keys, the snapshot has %d", rc.Keys, want.TotalKey))
	}
	// A pending compaction is finished when the store opens, which
	// changes the key bucket.
	if !want.CompactPending && rc.KVHash != want.KVHash {
		diffs = append(diffs, fmt.Sprintf("key bucket hash %08x, the snapshot's is %08x", rc.KVHash, want.KVHash))
	}
	return diffs
}

// readStore opens etcd's key-value store (mvcc, with its lessor, as
// etcdserver does at start) on the restored db and reads the revision and
// the number of keys it would serve. The store finishes a compaction the
// snapshot had pending, as etcd would. The db is the throwaway copy: the
// store may write to it.
func readStore(ctx context.Context, db string) (rev, keys int64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open the key-value store: %v", r)
		}
	}()
	lg := zap.NewNop()
	be := backend.NewDefaultBackend(lg, db)
	defer be.Close()
	// The lessor is never promoted: it revokes nothing.
	le := lease.NewLessor(lg, be, nil, lease.LessorConfig{})
	defer le.Stop()
	s := mvcc.NewStore(lg, be, le, mvcc.StoreConfig{})
	defer s.Close()
	tx := s.Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
	defer tx.End()
	// From "\x00" to the end: every key (etcd's RangeEnd "\x00").
	r, err := tx.Range(ctx, []byte{0}, []byte{}, mvcc.RangeOptions{CountOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("count the keys: %w", err)
	}
	return tx.Rev(), int64(r.Count), nil
}

// removeRestoreDir removes the throwaway dir a restore check made: only
// ever a ".restore-check-" dir.
func removeRestoreDir(dir string) {
	if !strings.HasPrefix(filepath.Base(dir), restorePrefix) {
		return
	}
	_ = os.RemoveAll(dir)
}
