package backup

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// CheckDir refuses a backup dir that another local user could write
// into: one owned by anyone but this process's user or root, or writable
// by its group or by others (a sticky 1777 dir too: anyone can add
// files). In such a dir anyone can plant snapshots and sidecars that
// claim to be ours; no snapshot is taken there, nothing is pruned there
// and nothing there is recommended.
func CheckDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("backup dir %s is not a directory", dir)
	}
	if uid, ok := ownerOf(st); ok && !trustedUID(uid) {
		return fmt.Errorf("backup dir %s is owned by uid %d, not by this agent's user (uid %d) or root: refused (chown it)", dir, uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("backup dir %s is writable by group or others (mode %v): refused: other local users could plant snapshots in it (chmod go-w %s)", dir, st.Mode(), dir)
	}
	return nil
}

// trustedUID: files of this process's user or root; anyone else's are
// not ours, whatever their sidecar says.
func trustedUID(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

func ownerOf(info fs.FileInfo) (uint32, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// distrust says why a file of a backup dir is not trusted ("" when it
// is): it is not owned by this agent's user or root.
func distrust(what string, info fs.FileInfo) string {
	if uid, ok := ownerOf(info); ok && !trustedUID(uid) {
		return fmt.Sprintf("%s is owned by uid %d, not this agent's user or root", what, uid)
	}
	return ""
}

// fileID is what must stay the same for a file's content to be the one
// hashed: a write moves mtime and ctime, and nobody can set ctime back
// (see sumcache.go for whom that holds against).
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func idOf(info fs.FileInfo) (fileID, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// sums caches the sha256 of snapshot files by fileID in this process, in
// front of the cache files next to the snapshots (sumcache.go), so that
// checking the newest and the kept snapshots against their sidecars reads
// each (multi-GB) file once per sumMaxAge, not on every prune, inspection
// or agent start.
var sums = struct {
	sync.Mutex
	m map[fileID]knownSum
}{m: map[fileID]knownSum{}}

// knownSum is a sha256 and when it was hashed.
type knownSum struct {
	sum string
	at  time.Time
}

// maxSums bounds the cache; past it, it starts over.
const maxSums = 1024

func rememberSum(id fileID, k knownSum) {
	sums.Lock()
	defer sums.Unlock()
	if len(sums.m) >= maxSums {
		clear(sums.m)
	}
	sums.m[id] = k
}

// sumNow is the clock of the sum caches (tests move it).
var sumNow = time.Now

// fileSHA256 is the sha256 of the regular file at path: from this
// process's cache, else from the file's cache file when sumTrusted says
// it may stand for the file as it is now, else read and hashed (and
// remembered in both when the file did not change while it was read).
func fileSHA256(path string) (string, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("snapshot %s: not a regular file", path)
	}
	id, ok := idOf(info)
	if ok {
		sums.Lock()
		k, hit := sums.m[id]
		sums.Unlock()
		if hit && hashFresh(k.at, sumNow()) == "" {
			return k.sum, nil
		}
		if rec, err := readSumRecord(path); err == nil {
			if trusted, _ := sumTrusted(rec, filepath.Base(path), id, sumNow()); trusted {
				rememberSum(id, knownSum{rec.SHA256, rec.VerifiedAt})
				return rec.SHA256, nil
			}
		}
	}
	if !ok {
		return hashFile(path)
	}
	return hashOnce(path, id)
}

// hashing holds the hashes under way, so that two callers that miss the
// caches at once (an agent's start: the schedule's last snapshot and a
// repair's reusable one are the same file) read the file once.
var hashing = struct {
	sync.Mutex
	m map[fileID]*hashCall
}{m: map[fileID]*hashCall{}}

type hashCall struct {
	done chan struct{}
	sum  string
	err  error
}

// hashOnce hashes the file at path, whose stat was id, or waits for the
// hash of the same file already under way.
func hashOnce(path string, id fileID) (string, error) {
	hashing.Lock()
	if c, ok := hashing.m[id]; ok {
		hashing.Unlock()
		<-c.done
		return c.sum, c.err
	}
	c := &hashCall{done: make(chan struct{})}
	hashing.m[id] = c
	hashing.Unlock()
	defer func() {
		hashing.Lock()
		delete(hashing.m, id)
		hashing.Unlock()
		close(c.done)
	}()
	at := sumNow()
	c.sum, c.err = hashFile(path)
	if c.err != nil {
		return "", c.err
	}
	// Remembered only if the file did not change while it was read.
	if after, err := os.Lstat(path); err == nil {
		if id2, ok := idOf(after); ok && id2 == id {
			remember(path, id, knownSum{c.sum, at})
		}
	}
	return c.sum, nil
}

// remember keeps a file's sum in this process and in its cache file. A
// cache file that cannot be written costs the next process a hash,
// nothing else.
func remember(path string, id fileID, k knownSum) {
	rememberSum(id, k)
	_ = writeSumRecord(path, sumRecord{File: filepath.Base(path), SHA256: k.sum, Stat: stampOf(id), VerifiedAt: k.at.UTC()})
}

// hashFile is wholeSHA256 (tests count its calls).
var hashFile = wholeSHA256

// wholeSHA256 reads the file at path and returns its sha256.
func wholeSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read snapshot: %w", err)
	}
	return hexSum(h), nil
}

// noteSum remembers the sha256 a snapshot had when it was written and
// verified (hashed at at), under its stat after its rename into place.
func noteSum(path, sum string, at time.Time) {
	if info, err := os.Lstat(path); err == nil {
		if id, ok := idOf(info); ok {
			remember(path, id, knownSum{sum, at})
		}
	}
}

// Intact: e's file is a regular file whose sha256 is its sidecar's.
func Intact(e Entry) bool {
	if e.Sidecar == nil || e.Sidecar.SHA256 == "" {
		return false
	}
	sum, err := fileSHA256(e.Path())
	return err == nil && sum == e.Sidecar.SHA256
}
