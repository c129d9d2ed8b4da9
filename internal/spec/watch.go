package spec

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls changed whenever the spec file at path may have changed, until
// ctx ends. It watches the file's directory, not the file: editors and
// config management replace a file by rename, and Kubernetes swaps a
// "..data" symlink, so a watch on the file itself would go silent after the
// first replace. Events are debounced; a periodic call every poll covers
// filesystems that send no events (NFS, FUSE). changed only says "look
// again": the caller reads and validates the file itself.
func Watch(ctx context.Context, path string, debounce, poll time.Duration, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch directory %s: %w", dir, err)
	}
	var fire <-chan time.Time
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if relevant(ev, path) {
				fire = time.After(debounce)
			}
		case <-w.Errors:
			// A dropped event only delays the next look: the poll covers it.
		case <-fire:
			fire = nil
			changed()
		case <-ticker.C:
			changed()
		}
	}
}

// relevant: an event on the spec file itself, or on a symlink swap in its
// directory (Kubernetes' "..data"), may change what path reads as.
func relevant(ev fsnotify.Event, path string) bool {
	if filepath.Clean(ev.Name) == filepath.Clean(path) {
		return true
	}
	base := filepath.Base(ev.Name)
	return base == "..data" || ev.Has(fsnotify.Create) && base == filepath.Base(path)
}
