package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// The verified-sum cache: <snapshot>.sha256, next to each snapshot, says
// "this file, as stat(2) saw it then, had this sha256 at that time". It
// lets a new agent process (every repair runs in one: the agent is
// restarted on the host it repairs) trust a multi-GB snapshot's sha256
// without reading the file again: hashing a 1.1 GB snapshot costs 2–4 s of
// CPU on a loaded 2-core host, right before a repair starts.
//
// What it is keyed by: the device, inode, size, mtime and ctime of the
// snapshot (fileID). Any write to the file moves its mtime and its ctime;
// a rename over it (a new file) changes the inode and its ctime; a file
// deleted and made again with the same inode number has a new ctime.
// mtime can be set back by anyone who may write the file (utimes(2),
// touch -r, cp -p, rsync -t), ctime cannot: the kernel sets it from its
// clock on every change of the inode, utimes included, and only setting
// the system clock back or editing the raw block device (both root) can
// give a changed file its old ctime.
//
// Who could fool it:
//   - Another local user, unprivileged: cannot. The dir must pass CheckDir
//     (owned by this agent's user or root, not writable by group or
//     others), the snapshot is written 0600, and a cache file is trusted
//     only when it is a regular file (opened without following a symlink)
//     owned by this agent's user or root: such a user can neither write a
//     cache file nor change the snapshot it describes
//     (TestPlantedSumCacheIgnored).
//   - This agent's user or root: can rewrite the file and, with it, its
//     sidecar's sha256, which the cache only stands in for; the cache gives
//     them nothing they did not have. What it must not do is hide an
//     accident — an in-place edit, a restore tool that preserves the mtime:
//     ctime sees those (TestSumCacheInPlaceEdit).
//   - Neither stat nor the kernel sees a change that bypasses the
//     filesystem: bit rot, a bad sector, a buggy controller. So an entry
//     is trusted for sumMaxAge after the hash it records, then the file is
//     read again.
//   - The kernel stamps times from a coarse clock (a tick, a few ms): a
//     write within the same tick as the stat that keyed the entry would go
//     unseen. Only this agent's user or root can write a snapshot, and a
//     snapshot is never written after its rename into place.
//
// A cache file that is missing, unreadable, damaged, not ours, for another
// file or for another stat is ignored: the file is hashed as if there were
// none, and the entry is written again.

// sumSuffix names a snapshot's cache file: <snapshot>.sha256 (not a
// snapshot name: parseName wants .db).
const sumSuffix = ".sha256"

// sumMaxAge is how long a hash is trusted without reading the file again:
// a day. Long enough that no repair pays for it (the snapshot a repair
// reuses is at most repair.snapshotMaxAge old, 2h by default, and its
// entry was written when it was taken and verified); short enough that
// damage no stat can see (bit rot on a kept snapshot) is found within a
// day, by retention's check of the kept snapshots after each scheduled
// one, before anyone needs that snapshot.
const sumMaxAge = 24 * time.Hour

// sumRecord is a cache file's content.
type sumRecord struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Stat is the file's stat when it was hashed (before and after: the
	// same).
	Stat       statStamp `json:"stat"`
	VerifiedAt time.Time `json:"verifiedAt"`
}

// statStamp is fileID as written to a cache file.
type statStamp struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
	CtimeNs int64  `json:"ctimeNs"`
}

func stampOf(id fileID) statStamp {
	return statStamp{Dev: id.dev, Ino: id.ino, Size: id.size, MtimeNs: id.mtime, CtimeNs: id.ctime}
}

func (s statStamp) id() fileID {
	return fileID{dev: s.Dev, ino: s.Ino, size: s.Size, mtime: s.MtimeNs, ctime: s.CtimeNs}
}

// sumTrusted is the match rule: the sum rec records may stand for the
// sha256 of file as stat sees it now (cur) at now, or why not.
func sumTrusted(rec sumRecord, file string, cur fileID, now time.Time) (bool, string) {
	was := rec.Stat.id()
	switch {
	case rec.File != file:
		return false, fmt.Sprintf("the entry is for %q", rec.File)
	case len(rec.SHA256) != 64:
		return false, "the entry has no sha256"
	case was.dev != cur.dev || was.ino != cur.ino:
		return false, "another file (device or inode differ)"
	case was.size != cur.size:
		return false, "the size changed"
	case was.mtime != cur.mtime:
		return false, "the mtime changed"
	case was.ctime != cur.ctime:
		return false, "the ctime changed (the file or its metadata was changed)"
	}
	if why := hashFresh(rec.VerifiedAt, now); why != "" {
		return false, why
	}
	return true, ""
}

// hashFresh says why a hash made at at is no longer trusted at now ("" when
// it is): made more than sumMaxAge ago, or after now (the clock was set
// back: its age is unknown).
func hashFresh(at, now time.Time) string {
	switch {
	case at.After(now):
		return "hashed in the future (the clock was set back)"
	case now.Sub(at) > sumMaxAge:
		return fmt.Sprintf("hashed more than %s ago", sumMaxAge)
	}
	return ""
}

// maxSumFile bounds what is read of a cache file.
const maxSumFile = 4 << 10

// readSumRecord reads the cache file of the snapshot at path: a regular
// file (never through a symlink) of this agent's user or root, in a dir
// CheckDir accepts.
func readSumRecord(path string) (sumRecord, error) {
	var rec sumRecord
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return rec, err
	}
	f, err := os.OpenFile(path+sumSuffix, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return rec, fmt.Errorf("sum cache: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return rec, fmt.Errorf("sum cache: %w", err)
	}
	if !info.Mode().IsRegular() {
		return rec, errors.New("sum cache: not a regular file")
	}
	if why := distrust("the sum cache", info); why != "" {
		return rec, errors.New(why)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSumFile+1))
	if err != nil {
		return rec, fmt.Errorf("sum cache: %w", err)
	}
	if len(b) > maxSumFile {
		return rec, errors.New("sum cache: too large")
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("sum cache: %w", err)
	}
	return rec, nil
}

// writeSumRecord writes the cache file of the snapshot at path, 0600,
// atomically; only into a dir CheckDir accepts.
func writeSumRecord(path string, rec sumRecord) error {
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode sum cache: %w", err)
	}
	return atomicfile.WriteFile(path+sumSuffix, append(b, '\n'), 0o600)
}
