package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/schema"
)

// DBMember is one member of the cluster as a data dir's db lists it.
type DBMember struct {
	ID      uint64
	Name    string
	Learner bool
}

// DBMembers reads the members bucket of dataDir's db offline (read-only,
// bbolt's shared lock: it fails at once while an etcd holds the db): the
// membership as this member last applied it. etcd keeps it there
// (schema.MustSaveMemberToBackend: key the hex ID, value the member's
// JSON). A conf change committed to the WAL but not yet applied to the
// db is not in it. No db, or no bucket: nil and no error.
func DBMembers(dataDir string) ([]DBMember, error) {
	path := datadir.ToBackendFileName(dataDir)
	if st, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		return nil, nil
	}
	var out []DBMember
	err := safely("reading the members bucket", func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: dbLockTimeout})
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("%w: %s is locked by another process (a running etcd?)", errLocked, path)
		}
		if err != nil {
			return fmt.Errorf("failed to open database %s: %w", path, err)
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(schema.Members.Name())
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				var m struct {
					ID        uint64 `json:"id"`
					Name      string `json:"name"`
					IsLearner bool   `json:"isLearner"`
				}
				if err := json.Unmarshal(v, &m); err != nil {
					return fmt.Errorf("member %s in %s: %w", k, path, err)
				}
				out = append(out, DBMember{ID: m.ID, Name: m.Name, Learner: m.IsLearner})
				return nil
			})
		})
	})
	return out, err
}
