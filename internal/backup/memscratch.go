package backup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memDir is where the plaintext of an encrypted snapshot goes while a
// restore check or drill restores it: a memory filesystem (tmpfs), so
// that no plaintext copy of the keyspace is ever written to a disk, in
// the backup dir or anywhere else. The agent's unit keeps /dev/shm
// (PrivateDevices= binds it). A variable for the tests.
var memDir = "/dev/shm"

// memPrefix starts every scratch dir of ours in memDir; the pid that
// made it follows, so that a later run removes what a killed one left
// (and never a live agent's: several run on one test host).
const memPrefix = ".etcdkeeper-restore-"

// walRoom is what a restored data dir needs beside its db: the first WAL
// segment (etcd preallocates 64 MiB) and a margin.
const walRoom = 80 << 20

// restoreRoom is what a restore check or drill of a plaintext of
// plainSize bytes needs in memory: its decryption and the restored data
// dir (the db copied once more and a WAL), about twice the plaintext.
func restoreRoom(plainSize int64) int64 { return 2*plainSize + walRoom }

// memRoom says why memDir cannot take need bytes of plaintext: it is not
// a tmpfs, or either it or the host's memory (MemAvailable) has less
// room. nil: it can.
func memRoom(need int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(memDir, &st); err != nil {
		return fmt.Errorf("no memory filesystem for the plaintext: %w", err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("%s is not a memory filesystem (tmpfs): the plaintext is not written to a disk", memDir)
	}
	SweepMemory()
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Errorf("restoring in memory needs %d MiB in %s, %d MiB free", need>>20, memDir, free>>20)
	}
	if avail := memAvailable(); avail >= 0 && avail < need {
		return fmt.Errorf("restoring in memory needs %d MiB of memory, %d MiB available (MemAvailable)", need>>20, avail>>20)
	}
	return nil
}

// memScratch makes a 0700 dir in memDir for need bytes of plaintext, or
// refuses with why (memRoom). A restore check then checks the snapshot
// without restoring it (Decrypts); a restore that changes something
// (ForRestore) refuses.
func memScratch(need int64) (string, error) {
	if err := memRoom(need); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(memDir, memPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return "", fmt.Errorf("restore dir in memory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("restore dir in memory: %w", err)
	}
	return dir, nil
}

// removeMem removes a scratch dir memScratch made (only ever one).
func removeMem(dir string) {
	if filepath.Dir(dir) != filepath.Clean(memDir) || !strings.HasPrefix(filepath.Base(dir), memPrefix) {
		return
	}
	_ = os.RemoveAll(dir)
}

// SweepMemory removes the scratch dirs in memDir of processes that are
// gone (killed inside a restore check or a recovery's restore): the
// plaintext stays in memory no longer than the next restore. A resumed
// recovery calls it first.
func SweepMemory() {
	dirs, _ := filepath.Glob(filepath.Join(memDir, memPrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), memPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() {
			continue
		}
		if err := unix.Kill(n, 0); err == nil || err == unix.EPERM {
			continue // alive (or another user's: not ours to judge)
		}
		removeMem(d)
	}
}
