// Package statefile is the one way a file of the agent's state dir is
// read and written: JSON, replaced atomically (package atomicfile) with
// mode 0600, and on every read refused unless it is a regular file owned
// by root or this process's user that no one else may write. The state
// dir's journals, marker and pause records all go through it, so each
// rule about them (atomic, private, trusted) is written once.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// Mode is the mode every state file is written with.
const Mode = 0o600

// Load reads the JSON file at path into v. found is false (and v left as
// it was) when there is no file; a file that another local user could
// have written, or one that does not parse, is an error naming it.
func Load(path string, v any) (found bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return true, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := Trusted(path, fi); err != nil {
		return true, err
	}
	if err := json.NewDecoder(f).Decode(v); err != nil {
		return true, fmt.Errorf("%s does not parse: %w", path, err)
	}
	return true, nil
}

// Trusted says why the state file at path, as fi describes it, is not to
// be believed (nil: it is).
func Trusted(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: refused", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by root or the agent's user (uid %d): refused (it is not this agent's)", path, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v): refused (chmod 600 %s)", path, fi.Mode(), path)
	}
	return nil
}

// Save writes v as indented JSON to path atomically, mode 0600, creating
// its directory (0700) if needed.
func Save(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("state dir for %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), Mode)
}

// Remove removes the file at path; one that is not there is removed.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
