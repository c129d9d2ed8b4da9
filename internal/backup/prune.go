package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// Owner is the agent whose snapshots retention may delete.
type Owner struct {
	Cluster string
	Member  string
}

// Prune chooses which snapshots retention deletes: of the entries that
// owner's schedule wrote and verified (Sidecar.owns), all but the newest
// keep; never the newest verified entry of the dir, whoever wrote it;
// never an entry without a verified sidecar. It is pure: the caller
// checks each file's sha256 again before deleting it (removeSnapshot).
func Prune(entries []Entry, owner Owner, keep int) []Entry {
	keep = max(keep, 1)
	var del []Entry
	newestSeen, kept := false, 0
	for _, e := range sorted(entries) {
		if !e.Verified() {
			continue
		}
		newest := !newestSeen
		newestSeen = true
		if _, ok := parseName(owner.Cluster, e.File); !ok || !e.Sidecar.owns(e.File, owner.Cluster, owner.Member) {
			continue
		}
		if newest || kept < keep {
			kept++
			continue
		}
		del = append(del, e)
	}
	return del
}

// RemovePruned deletes what Prune chooses in dir and returns the files it
// deleted. It is the only code in etcdkeeper that deletes a snapshot.
func RemovePruned(dir string, owner Owner, keep int) ([]string, error) {
	entries, err := List(dir, owner.Cluster)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range Prune(entries, owner, keep) {
		if err := removeSnapshot(e, owner); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.File)
	}
	if len(removed) > 0 {
		if err := atomicfile.SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// removeSnapshot deletes one snapshot Prune chose, after checking again,
// on disk, that it is still what its sidecar describes: a regular file
// with the pattern's name, a sidecar that owner's schedule wrote and
// verified for this file, and the sha256 in that sidecar.
func removeSnapshot(e Entry, owner Owner) error {
	if _, ok := parseName(owner.Cluster, e.File); !ok || filepath.Base(e.File) != e.File {
		return fmt.Errorf("retention: %s: not a snapshot name", e.File)
	}
	path, sidecar := filepath.Join(e.Dir, e.File), filepath.Join(e.Dir, SidecarName(e.File))
	sc, err := readSidecar(sidecar)
	if err != nil {
		return fmt.Errorf("retention: %s: %w", e.File, err)
	}
	if !sc.owns(e.File, owner.Cluster, owner.Member) {
		return fmt.Errorf("retention: %s: its sidecar does not say this agent wrote and verified it: kept", e.File)
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("retention: %s: not a regular file: kept", e.File)
	}
	sum, _, _, err := fileSums(path)
	if err != nil || sum != sc.SHA256 {
		return fmt.Errorf("retention: %s: its sha256 is not the one its sidecar records: kept", e.File)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	if err := os.Remove(sidecar); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}
