package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// Verification is what checking a snapshot file found: etcdutl's
// `snapshot status` numbers, computed by etcdutl's own code, and the
// checks around them.
type Verification struct {
	// Hash, Revision, TotalKey, TotalSize, Version: `etcdutl snapshot
	// status` (its bbolt check passed, or Error says why not).
	Hash      uint32 `json:"hash"`
	Revision  int64  `json:"revision"`
	TotalKey  int    `json:"totalKey"`
	TotalSize int64  `json:"totalSize"`
	Version   string `json:"version,omitempty"`
	// Integrity: "ok" when the sha256 etcd appends to a snapshot stream
	// matches the db, "none" when the file has none (a copied db).
	Integrity string `json:"integrity"`
	// KVHash is the crc32 (Castagnoli) of the key bucket alone: the
	// keyspace with its history, which a restore must not change.
	KVHash uint32 `json:"kvHash"`
	// CompactPending: the snapshot holds a compaction etcd had scheduled
	// but not finished; etcd finishes it when it starts from it, which
	// changes the key bucket (and KVHash).
	CompactPending bool   `json:"compactPending,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Verify checks the snapshot at path and returns what it found and the
// file's sha256 and size. err is non-nil when the file is not a good
// snapshot; the Verification says as much as was found.
func Verify(path string) (Verification, string, int64, error) {
	s, err := fileSums(path)
	return verifySummed(path, s, err)
}

// verifySummed is Verify of a file whose bytes were hashed as they were
// written (s, and sumErr: what streamSums said): the file is not read
// again for its sums.
func verifySummed(path string, s summed, sumErr error) (Verification, string, int64, error) {
	var v Verification
	sum, size := s.SHA256, s.Size
	if sumErr != nil {
		v.Error = sumErr.Error()
		return v, sum, size, sumErr
	}
	v.Integrity = s.Integrity
	fail := func(err error) (Verification, string, int64, error) {
		v.Error = err.Error()
		return v, sum, size, err
	}
	if err := precheck(path, size-trailerLen(s.Integrity == "ok")); err != nil {
		return fail(err)
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return fail(fmt.Errorf("snapshot status: %w", err))
	}
	v.Hash, v.Revision, v.TotalKey, v.TotalSize, v.Version = st.Hash, st.Revision, st.TotalKey, st.TotalSize, st.Version
	v.KVHash, v.CompactPending, err = kvHash(path)
	if err != nil {
		return fail(err)
	}
	return v, sum, size, nil
}

// precheck refuses a db shorter than its meta page says before bbolt's
// check walks its pages: that walk runs in bbolt's own goroutines, where
// a page beyond the end of the file is a panic that nothing can recover
// (the same guard as repair's offline check).
func precheck(path string, dbSize int64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open db: %v", r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open db: %w", err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if want := tx.Size(); dbSize < want {
			return fmt.Errorf("db is truncated: %d bytes, its meta page needs %d", dbSize, want)
		}
		return nil
	})
}

// fileSums reads the file once for its sums (streamSums).
func fileSums(path string) (summed, error) {
	f, err := os.Open(path)
	if err != nil {
		return summed{}, fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	s := newStreamSums()
	if _, err := copyChunks(s, f); err != nil {
		return summed{Size: s.n}, fmt.Errorf("read snapshot: %w", err)
	}
	return s.result()
}

func trailerLen(has bool) int64 {
	if has {
		return sha256.Size
	}
	return 0
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// kvHash hashes the key bucket of the bolt db at path and reads whether a
// compaction is pending.
func kvHash(path string) (uint32, bool, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, false, fmt.Errorf("open db: %w", err)
	}
	defer db.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	pending := false
	err = db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(schema.Meta.Name()); meta != nil {
			pending = compactRev(meta.Get(schema.ScheduledCompactKeyName)) > compactRev(meta.Get(schema.FinishedCompactKeyName))
		}
		b := tx.Bucket(schema.Key.Name())
		if b == nil {
			return errors.New("db has no key bucket")
		}
		return b.ForEach(func(k, v []byte) error {
			h.Write(k)
			h.Write(v)
			return nil
		})
	})
	if err != nil {
		return 0, false, fmt.Errorf("hash key bucket: %w", err)
	}
	return h.Sum32(), pending, nil
}

func compactRev(b []byte) int64 {
	if len(b) < 17 {
		return 0
	}
	return mvcc.BytesToRev(b).Main
}
