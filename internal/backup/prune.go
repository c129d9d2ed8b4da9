package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// Owner is the agent whose snapshots retention may delete.
type Owner struct {
	Cluster string
	Member  string
	// ClusterID is the ID (hex) of the cluster this agent's snapshots are
	// read from; without it nothing is pruned.
	ClusterID string
}

// Prune chooses which snapshots retention deletes. Only the entries that
// count for owner's cluster (Entry.counts: verified, this agent's user's
// files, owner's cluster ID) and are intact (their file's sha256 is the
// sidecar's) are kept in the count: a forged or foreign entry can neither
// push ours out of the newest keep nor be the newest of the dir. Of the
// entries that owner's schedule wrote (Sidecar.owns), all but the newest
// keep are chosen; never the newest counted entry of the dir, whoever
// wrote it; never an entry that does not count. intact is asked only for
// the entries that would be kept (the newest and owner's newest keep):
// the chosen ones are hashed again just before deleting anyway
// (removeSnapshot), and the others do not matter.
func Prune(entries []Entry, owner Owner, keep int, intact func(Entry) bool) []Entry {
	keep = max(keep, 1)
	var del []Entry
	newestSeen, kept := false, 0
	for _, e := range sorted(entries) {
		if !e.counts(owner.ClusterID) {
			continue
		}
		_, named := parseName(owner.Cluster, e.File)
		ours := named && e.Sidecar.owns(e.File, owner)
		if newestSeen && !ours {
			continue
		}
		if !newestSeen || kept < keep {
			if !intact(e) {
				continue
			}
			newestSeen = true
			if ours {
				kept++
			}
			continue
		}
		del = append(del, e)
	}
	return del
}

// RemovePruned deletes what Prune chooses in dir and returns the files it
// deleted. It is the only code in etcdkeeper that deletes a snapshot. It
// refuses a dir another local user can write to (CheckDir).
func RemovePruned(dir string, owner Owner, keep int) ([]string, error) {
	if err := CheckDir(dir); err != nil {
		return nil, fmt.Errorf("retention: nothing pruned: %w", err)
	}
	if owner.ClusterID == "" {
		return nil, errors.New("retention: nothing pruned: the cluster ID is not known")
	}
	entries, err := List(dir, owner.Cluster)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range Prune(entries, owner, keep, Intact) {
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
// of this agent's user (or root) with the pattern's name, a sidecar of
// the same that owner's schedule wrote and verified for this file from
// owner's cluster, and the sha256 in that sidecar, read afresh.
func removeSnapshot(e Entry, owner Owner) error {
	if _, ok := parseName(owner.Cluster, e.File); !ok || filepath.Base(e.File) != e.File {
		return fmt.Errorf("retention: %s: not a snapshot name", e.File)
	}
	path, sidecar := filepath.Join(e.Dir, e.File), filepath.Join(e.Dir, SidecarName(e.File))
	sc, err := readSidecar(sidecar)
	if err != nil {
		return fmt.Errorf("retention: %s: %w", e.File, err)
	}
	if !sc.owns(e.File, owner) {
		return fmt.Errorf("retention: %s: its sidecar does not say this agent wrote and verified it: kept", e.File)
	}
	for _, p := range []string{path, sidecar} {
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("retention: %s: not a regular file: kept", filepath.Base(p))
		}
		if why := distrust(filepath.Base(p), st); why != "" {
			return fmt.Errorf("retention: %s: kept", why)
		}
	}
	sum, err := wholeSHA256(path)
	if err != nil || sum != sc.SHA256 {
		return fmt.Errorf("retention: %s: its sha256 is not the one its sidecar records: kept", e.File)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	if err := os.Remove(sidecar); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	// Its sum cache (sumcache.go) goes with it; none is fine.
	if err := os.Remove(path + sumSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}
