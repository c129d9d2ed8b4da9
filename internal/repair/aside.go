package repair

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// backupStamp starts every backup name: RFC 3339 in UTC with ':' replaced
// (file-name safe) and fixed width, so names sort by time.
const backupStamp = "2006-01-02T15-04-05.000Z"

// MoveAside moves the member out of dataDir: it renames dataDir/member to
// backupDir/<timestamp>-<basename of dataDir>/member and returns the new
// backup folder. It never deletes or copies: broken data is kept until the
// cluster is healthy again (field-notes §3). Moving the member dir rather
// than the data dir itself works when the data dir is a mount point or the
// root of a systemd StateDirectory=, and lets the default backup dir live
// inside the data dir, on its filesystem, always writable. A data dir
// without a member is nothing to move: it returns "" and nil, so a repair
// step that is run again after a crash does nothing.
func MoveAside(dataDir, backupDir string, now time.Time) (string, error) {
	member := filepath.Join(dataDir, "member")
	if _, err := os.Lstat(member); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	dest := filepath.Join(backupDir, now.UTC().Format(backupStamp)+"-"+filepath.Base(filepath.Clean(dataDir)))
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf("move %s aside: %s already exists", member, dest)
	}
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return "", fmt.Errorf("create backup dir: %w", err)
	}
	if err := os.Rename(member, filepath.Join(dest, "member")); err != nil {
		_ = os.Remove(dest) // our own empty folder; nothing was moved
		return "", explainRename(dataDir, backupDir, err)
	}
	for _, dir := range []string{dataDir, dest} {
		if err := atomicfile.SyncDir(dir); err != nil {
			return dest, fmt.Errorf("moved %s to %s but: %w", member, dest, err)
		}
	}
	return dest, nil
}

// CheckMoveAside proves, before a repair changes anything, that MoveAside
// will be able to move the member out of dataDir: it renames an empty
// probe folder from the data dir into backupDir and back out. A repair
// that removed the member from the cluster and then could not move its data
// would stop half-way.
func CheckMoveAside(dataDir, backupDir string) error {
	if err := os.MkdirAll(backupDir, 0o700); err != nil {
		return fmt.Errorf("backup dir %s cannot be created: %w: set agent.backupDir to a writable folder on the data dir's filesystem; nothing was changed", backupDir, err)
	}
	probe := filepath.Join(dataDir, fmt.Sprintf(".etcdkeeper-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("data dir %s is not writable: %w; nothing was changed", dataDir, err)
	}
	moved := filepath.Join(backupDir, filepath.Base(probe))
	err := os.Rename(probe, moved)
	if err != nil {
		_ = os.Remove(probe)
		return fmt.Errorf("%w (checked before changing anything)", explainRename(dataDir, backupDir, err))
	}
	_ = os.Remove(moved) // the empty probe folder this function made
	return nil
}

// explainRename: a rename that cannot stay on one filesystem is refused,
// never turned into a copy, which would be slow and not atomic in the middle
// of a repair (field-notes §4: under systemd's ProtectSystem=strict every
// StateDirectory=/ReadWritePaths= entry is its own mount).
func explainRename(dataDir, backupDir string, err error) error {
	switch {
	case errors.Is(err, syscall.EXDEV):
		return fmt.Errorf("move %s aside: %w: the backup dir %s is on another filesystem (or mount); it must be on the data dir's own filesystem (the default, inside the data dir, always is); nothing was copied or moved",
			dataDir, err, backupDir)
	}
	return fmt.Errorf("move %s aside to %s: %w", dataDir, backupDir, err)
}

// ListBackups returns the paths of the backups MoveAside put in
// backupDir, newest first. Other entries are ignored; a missing backupDir
// has none.
func ListBackups(backupDir string) ([]string, error) {
	entries, err := os.ReadDir(backupDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var names []string
	for _, e := range entries {
		if isBackupName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	// Fixed-width UTC stamps: reverse name order is newest first.
	slices.Sort(names)
	slices.Reverse(names)
	for i, n := range names {
		names[i] = filepath.Join(backupDir, n)
	}
	return names, nil
}

// isBackupName: "<backupStamp>-<basename>".
func isBackupName(name string) bool {
	n := len(backupStamp)
	if len(name) < n+2 || name[n] != '-' {
		return false
	}
	_, err := time.Parse(backupStamp, name[:n])
	return err == nil
}

// FreeBytes is the space available to unprivileged users on the filesystem
// that holds path, or would hold it: path need not exist yet, its nearest
// existing ancestor is asked.
func FreeBytes(path string) (uint64, error) {
	p := filepath.Clean(path)
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
		p = parent
	}
}

// RateLimited reports whether maxPerHour repairs already started in the
// hour before now (attempts after now, from a clock that stepped back,
// count too). maxPerHour <= 0 allows none.
func RateLimited(attempts []time.Time, now time.Time, maxPerHour int) bool {
	since := now.Add(-time.Hour)
	n := 0
	for _, a := range attempts {
		if a.After(since) {
			n++
		}
	}
	return n >= maxPerHour
}
