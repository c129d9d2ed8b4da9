package etcdproc

import (
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// RemoveDefragTemps removes the temporary files an etcd killed in the
// middle of a defragmentation left next to its db
// (<dataDir>/member/snap/db.tmp.*), before etcd starts on dataDir again.
//
// etcd's defragmentation copies the keys into such a file and renames it
// over the db only when the copy is complete, so the db itself is whole;
// the file is a partial copy, as large as the keys, that no one reads.
// etcd means to remove it at start (snap.Snapshotter.cleanupSnapdir), but
// etcd 3.7.3 reaches that only through LoadNewestAvailable, which its
// server does not call: every kill mid-defragmentation kept one more, for
// good. Removing it is what etcd intends; it is not the member's data
// (which etcdkeeper never deletes). Only files of that name in that dir,
// only while no etcd runs there (the supervisor's Start).
func RemoveDefragTemps(lg *zap.Logger, dataDir string) error {
	dir := filepath.Join(dataDir, "member", "snap")
	temps, err := filepath.Glob(filepath.Join(dir, "db.tmp*"))
	if err != nil {
		return fmt.Errorf("defragmentation temporaries in %s: %w", dir, err)
	}
	for _, f := range temps {
		st, err := os.Lstat(f)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove defragmentation temporary: %w", err)
		}
		lg.Warn("removed a defragmentation's temporary file left by an etcd stopped mid-defragmentation (the db itself is whole)",
			zap.String("file", f), zap.Int64("bytes", st.Size()))
	}
	return nil
}
