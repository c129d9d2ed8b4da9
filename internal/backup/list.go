package backup

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Entry is one snapshot file in a backup dir.
type Entry struct {
	Dir      string    `json:"dir"`
	File     string    `json:"file"`
	Time     time.Time `json:"time"`
	Revision int64     `json:"revision"`
	Size     int64     `json:"size"`
	// Sidecar is nil when the file has none (not verified, or a crash
	// before it was written) or it cannot be read (SidecarErr).
	Sidecar    *Sidecar `json:"sidecar,omitempty"`
	SidecarErr string   `json:"sidecarError,omitempty"`
}

// Path is the snapshot file's path.
func (e Entry) Path() string { return filepath.Join(e.Dir, e.File) }

// Verified: the sidecar names this file and says it passed verification.
func (e Entry) Verified() bool {
	return e.Sidecar != nil && e.Sidecar.Verified && e.Sidecar.File == e.File
}

// seq is the sidecar's sequence number, 0 without one.
func (e Entry) seq() int64 {
	if e.Sidecar == nil {
		return 0
	}
	return e.Sidecar.Seq
}

// newerFirst orders entries newest first without trusting the clock: the
// sidecar's sequence number, then the revision; the time in the name and
// the name only break ties.
func newerFirst(a, b Entry) int {
	return cmp.Or(cmp.Compare(b.seq(), a.seq()), cmp.Compare(b.Revision, a.Revision),
		b.Time.Compare(a.Time), strings.Compare(b.File, a.File))
}

// List returns the snapshots of cluster in dir, newest first. Other files
// (other clusters' snapshots, temporary names, anything else) are not
// entries. A dir that does not exist holds none.
func List(dir, cluster string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Entry
	for _, de := range des {
		p, ok := parseName(cluster, de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		e := Entry{Dir: dir, File: de.Name(), Time: p.Time, Revision: p.Revision, Size: info.Size()}
		switch s, err := readSidecar(filepath.Join(dir, SidecarName(de.Name()))); {
		case err == nil:
			e.Sidecar = s
		case !errors.Is(err, fs.ErrNotExist):
			e.SidecarErr = err.Error()
		}
		out = append(out, e)
	}
	slices.SortFunc(out, newerFirst)
	return out, nil
}

// NewestVerified is the newest verified entry, or false.
func NewestVerified(entries []Entry) (Entry, bool) {
	for _, e := range sorted(entries) {
		if e.Verified() {
			return e, true
		}
	}
	return Entry{}, false
}

func sorted(entries []Entry) []Entry {
	s := slices.Clone(entries)
	slices.SortFunc(s, newerFirst)
	return s
}

// nextSeq is the sequence number of the next snapshot written to a dir
// holding entries.
func nextSeq(entries []Entry) int64 {
	var top int64
	for _, e := range entries {
		top = max(top, e.seq())
	}
	return top + 1
}
