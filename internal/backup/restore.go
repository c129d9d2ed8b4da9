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
	// Checked is what was checked: CheckedRestore, or CheckedSHA256 on
	// a host without the identity ("" in sidecars from before it: a
	// restore).
	Checked string `json:"checked,omitempty"`
	// Note says why a check did less than a restore.
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// restoreMember is the name and peer URL the restored data dir is made
// for. Nothing ever listens on it: the check starts no server (a served
// copy of the keyspace on a port is readable by every local user).
const (
	restoreMember = "restore-check"
	restorePeer   = "http://restore-check.invalid:2380"
)

// RestoreCheck.Checked: what a check did.
const (
	// CheckedRestore: restored and compared (the identity read it).
	CheckedRestore = "restore"
	// CheckedSHA256: an encrypted snapshot on a host without the
	// identity: its ciphertext's sha256 was read afresh and compared with
	// its sidecar's; it was not restored.
	CheckedSHA256 = "ciphertext sha256"
	// CheckedDecrypt: an encrypted snapshot whose restore does not fit
	// in memory (memScratch): decrypted in full, both sides' sha256
	// compared with its sidecar's; not restored (no plaintext is written
	// to a disk).
	CheckedDecrypt = "decrypted"
)

// Timings are the steps of a restore, in seconds (the drill's figures).
// They add up to the restore's time.
type Timings struct {
	Download float64 `json:"download"`
	Decrypt  float64 `json:"decrypt"`
	Verify   float64 `json:"verify"`
	Restore  float64 `json:"restore"`
	// Streamed: the snapshot was decrypted as it downloaded, in one pass
	// (a drill from S3). Download is then the time that pass waited on
	// the bucket, and Decrypt the rest of it: what decrypting (and
	// writing the plaintext) added. The larger one is what limits it.
	Streamed bool `json:"streamed,omitempty"`
}

// CheckRestore restores the snapshot e with etcdutl's restore code into a
// throwaway data dir (0700) next to it and checks that dir offline, with
// no server and no listener: etcd's bootstrap checks (repair.Inspect: the
// WAL, its snapshot record, the db's consistent index), then etcd's own
// key-value store opened on the restored db for the revision and key
// count it would serve, and the hash of the key bucket; all compared with
// e's verification. An encrypted snapshot is decrypted with k's
// identities into that dir first (Plain); on a host without them, only
// its ciphertext's sha256 is checked (CheckedSHA256). The result is also
// written into e's sidecar.
func CheckRestore(ctx context.Context, e Entry, k Keys) RestoreCheck {
	start := time.Now()
	rc := RestoreCheck{At: start.UTC()}
	err := checkRestore(ctx, e, k, &rc)
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

func checkRestore(ctx context.Context, e Entry, k Keys, rc *RestoreCheck) error {
	if !e.Verified() {
		return errors.New("the snapshot is not verified")
	}
	if e.Sidecar.Encryption != nil && !k.CanRead() {
		rc.Checked = CheckedSHA256
		if sum, err := wholeSHA256(e.Path()); err != nil {
			return err
		} else if sum != e.Sidecar.SHA256 {
			return fmt.Errorf("%w: the file's sha256 %s is not its sidecar's (%s): it changed since it was written", ErrChanged, sum, e.Sidecar.SHA256)
		}
		return nil
	}
	tmp, err := scratchDir(e.Dir, restorePrefix)
	if err != nil {
		return err
	}
	defer removeRestoreDir(tmp)
	return restoreFrom(ctx, e.Path(), e.Sidecar, k, tmp, rc, &Timings{})
}

// scratchDir makes a throwaway dir in dir (0700: a copy of the keyspace
// goes in it) whose name starts with prefix.
func scratchDir(dir, prefix string) (string, error) {
	tmp, err := os.MkdirTemp(dir, prefix+"*")
	if err != nil {
		return "", fmt.Errorf("restore dir: %w", err)
	}
	// MkdirTemp makes it 0700; said again.
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", fmt.Errorf("restore dir: %w", err)
	}
	return tmp, nil
}

// restoreFrom is the offline restore of the snapshot at path (sidecar sc)
// into scratch, timed step by step into tm: decrypted when encrypted
// (Plain), then restorePlain.
func restoreFrom(ctx context.Context, path string, sc *Sidecar, k Keys, scratch string, rc *RestoreCheck, tm *Timings) error {
	rc.Checked = CheckedRestore
	step := time.Now()
	if sc.Encryption != nil {
		// The plaintext and the restored data dir live in memory only.
		mem, err := memScratch(restoreRoom(sc.Encryption.PlainSize))
		if err != nil {
			rc.Checked, rc.Note = CheckedDecrypt, "not restored: "+err.Error()
			if err := Decrypts(path, sc, k.Identities); err != nil {
				return err
			}
			tm.Decrypt = time.Since(step).Seconds()
			rc.Revision, rc.Keys = sc.Verification.Revision, int64(sc.Verification.TotalKey)
			return nil
		}
		defer removeMem(mem)
		scratch = mem
	}
	plain, sums, err := Plain(path, sc, k.Identities, k.NoIdentity, scratch)
	if err != nil {
		return err
	}
	tm.Decrypt = time.Since(step).Seconds()
	return restorePlain(ctx, plainSnapshot{path: plain, sums: sums, decrypted: plain != path}, sc, scratch, rc, tm)
}

// plainSnapshot is a plaintext snapshot ready for etcdutl's restore.
type plainSnapshot struct {
	path string
	// sums: its bytes were hashed as they were written (decrypted or
	// downloaded); nil: Verify reads them.
	sums *summed
	// decrypted: a copy in scratch, removed as soon as the restore has
	// read it.
	decrypted bool
}

// restorePlain verifies the plaintext snapshot p as etcdutl does (Verify)
// and compares it with what sc recorded, restores it with etcdutl's code
// into scratch/data, then reads it as etcd would serve it and compares
// again; timed into tm. Nothing trusts p before its sha256 is sc's.
func restorePlain(ctx context.Context, p plainSnapshot, sc *Sidecar, scratch string, rc *RestoreCheck, tm *Timings) error {
	rc.Checked = CheckedRestore
	want := sc.Verification
	step := time.Now()
	lap := func(d *float64) { *d = time.Since(step).Seconds(); step = time.Now() }
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restore check: %w", err)
	}
	var got Verification
	var sum string
	var err error
	if p.sums != nil {
		got, sum, _, err = verifySummed(p.path, *p.sums, nil)
	} else {
		got, sum, _, err = Verify(p.path)
	}
	if err != nil {
		return fmt.Errorf("the snapshot does not verify: %w", err)
	}
	wantSum := sc.SHA256
	if sc.Encryption != nil {
		wantSum = sc.Encryption.PlainSHA256
	}
	if sum != wantSum {
		return fmt.Errorf("%w: its sha256 %s is not its sidecar's (%s)", ErrChanged, sum, wantSum)
	}
	if got.Revision != want.Revision || got.TotalKey != want.TotalKey || got.Hash != want.Hash {
		return fmt.Errorf("%w: it holds revision %d, %d keys, hash %08x; the sidecar records revision %d, %d keys, hash %08x",
			ErrChanged, got.Revision, got.TotalKey, got.Hash, want.Revision, want.TotalKey, want.Hash)
	}
	lap(&tm.Verify)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restore check: %w", err)
	}
	dataDir := filepath.Join(scratch, "data")
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: p.path, Name: restoreMember, OutputDataDir: dataDir,
		PeerURLs: []string{restorePeer}, InitialCluster: restoreMember + "=" + restorePeer, InitialClusterToken: restoreMember,
	}); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if p.decrypted {
		// The decrypted copy goes as soon as the restore has read it.
		_ = os.Remove(p.path)
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
	lap(&tm.Restore)
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
func removeRestoreDir(dir string) { removeScratch(dir, restorePrefix) }

// removeScratch removes a scratch dir of ours: only ever one whose name
// starts with prefix.
func removeScratch(dir, prefix string) {
	if !strings.HasPrefix(filepath.Base(dir), prefix) {
		return
	}
	_ = os.RemoveAll(dir)
}
