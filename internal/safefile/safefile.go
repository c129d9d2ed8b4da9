// Package safefile reads input files that an operator names (a spec, a
// kubeadm manifest) without trusting them: regular files only, up to a
// size limit, so that /dev/zero, a FIFO or a huge file gives an error
// instead of exhausting memory or hanging.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular and ErrTooLarge are what Read refuses; they come back
// wrapped with the path.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Read reads path, which must be a regular file of at most limit bytes.
// The open does not block on a FIFO, and the size is checked both before
// and while reading (a file that grows is cut off).
func Read(path string, limit int64) ([]byte, error) {
	return read(path, path, 0, limit, nil)
}

// read opens name (flags beside O_RDONLY and nonblock), checks that it is
// a regular file of at most limit bytes that check (when not nil) accepts,
// and reads it; path is what errors call it.
func read(path, name string, flags int, limit int64, check func(os.FileInfo) error) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|nonblock|flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s): give a file", path, ErrNotRegular, kind(fi.Mode()))
	}
	if check != nil {
		if err := check(fi); err != nil {
			return nil, err
		}
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s: %w: larger than %d bytes, which no such file needs", path, ErrTooLarge, limit)
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

// ReadTrusted is Read of a file whose content decides who can read
// secrets (backup.encryption.recipientsFile): only root and this
// process's user may be able to change it. The file must be owned by one
// of them and writable by neither its group nor others, and so must every
// directory on its way from / (symlinks resolved; a root-owned sticky
// directory such as /tmp counts, since nobody else can rename what is in
// it), both as named and as resolved; the file itself must not be a
// symlink. The checks are made on the open file, and the directories
// before it is opened, so that a file swapped in after the check is not
// the one read. (A symlink whose target holds another symlink is checked
// as named and as resolved, not link by link.)
func ReadTrusted(path string, limit int64) ([]byte, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	// The directories as named (a symlink among them lives in the one
	// before it, checked first) and as resolved.
	if err := trustedDirs(filepath.Dir(path), os.Lstat); err != nil {
		return nil, err
	}
	if err := trustedDirs(dir, os.Stat); err != nil {
		return nil, err
	}
	data, err := read(path, filepath.Join(dir, filepath.Base(path)), syscall.O_NOFOLLOW, limit, func(fi os.FileInfo) error {
		return trusted(path, fi)
	})
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink: %w: name the file itself", path, ErrUntrusted)
	}
	return data, err
}

// trustedDirs checks dir and every directory above it (stat: os.Lstat,
// which leaves a symlink to be checked where it lives, or os.Stat).
func trustedDirs(dir string, stat func(string) (os.FileInfo, error)) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := stat(d)
		if err != nil {
			return err
		}
		if st.IsDir() {
			if err := trusted(d, st); err != nil {
				return err
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ErrUntrusted is what ReadTrusted refuses: a file or directory another
// user could change.
var ErrUntrusted = errors.New("another user could change it")

func trusted(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check: %w", path, ErrUntrusted)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by root or this process's user (uid %d): %w (chown it)", path, st.Uid, os.Geteuid(), ErrUntrusted)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 || (fi.IsDir() && st.Uid == 0 && fi.Mode()&os.ModeSticky != 0) {
		return nil
	}
	return fmt.Errorf("%s is writable by group or others (mode %v): %w (chmod go-w %s)", path, fi.Mode(), ErrUntrusted, path)
}
