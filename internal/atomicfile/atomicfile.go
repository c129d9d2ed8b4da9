// Package atomicfile replaces files so that after a crash each holds
// either its old or its new content, never a mix, and a reader never sees
// half a file: renameio writes a temp file in the same directory (rename
// is only atomic within one filesystem), fsyncs it and renames it over the
// target; then the directory is fsynced so that the rename itself is
// durable (renameio leaves that to its caller). A crash can leave a
// ".<name><digits>" temp file behind; nothing reads it.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write replaces path with what fill writes, with mode perm (the umask
// does not apply). When fill or any step fails, path is left as it was
// and the temp file is removed.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = f.Cleanup() }() // a no-op once replaced
	if err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteFile replaces path with data (see Write).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// SyncDir makes renames into or out of dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
