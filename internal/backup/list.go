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
	// Distrust says why the file or its sidecar is not this agent's
	// (owned by another local user): such an entry never counts.
	Distrust string `json:"distrust,omitempty"`
}

// Path is the snapshot file's path.
func (e Entry) Path() string { return filepath.Join(e.Dir, e.File) }

// Verified: the sidecar names this file and says it passed verification.
func (e Entry) Verified() bool {
	return e.Sidecar != nil && e.Sidecar.Verified && e.Sidecar.File == e.File
}

// ClusterID is the ID of the cluster the snapshot was read from, as its
// sidecar records it ("" without one: unknown).
func (e Entry) ClusterID() string {
	if e.Sidecar == nil {
		return ""
	}
	return e.Sidecar.Source.ClusterID
}

// counts: e may count as a snapshot of the cluster clusterID (hex, as
// the sidecars write it): verified, its files owned by this agent's user
// or root, and read from that very cluster. A sidecar without a cluster
// ID, or an unknown clusterID, never counts. Whether the file is still
// what its sidecar says (Intact) is checked by the callers, only for the
// entries that matter.
func (e Entry) counts(clusterID string) bool {
	return e.Verified() && e.Distrust == "" && clusterID != "" && e.ClusterID() == clusterID
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
		e := Entry{Dir: dir, File: de.Name(), Time: p.Time, Revision: p.Revision, Size: info.Size(), Distrust: distrust("the file", info)}
		side := filepath.Join(dir, SidecarName(de.Name()))
		switch s, err := readSidecar(side); {
		case err == nil:
			e.Sidecar = s
			if si, err := os.Lstat(side); err != nil || !si.Mode().IsRegular() {
				e.Distrust = cmp.Or(e.Distrust, "the sidecar is not a regular file")
			} else {
				e.Distrust = cmp.Or(e.Distrust, distrust("the sidecar", si))
			}
		case !errors.Is(err, fs.ErrNotExist):
			e.SidecarErr = err.Error()
		}
		out = append(out, e)
	}
	slices.SortFunc(out, newerFirst)
	return out, nil
}

// NewestVerified is the newest entry that is a verified snapshot of the
// cluster clusterID (hex, "" when the caller does not know it: then
// none), in a dir no other local user can write to (CheckDir), and whose
// file still has its sidecar's sha256 (hashed once per process and
// file, see fileSHA256), or false. Forged, foreign or damaged entries are
// skipped, never recommended.
func NewestVerified(entries []Entry, clusterID string) (Entry, bool) {
	dirOK := map[string]bool{}
	for _, e := range sorted(entries) {
		if !e.counts(clusterID) {
			continue
		}
		ok, seen := dirOK[e.Dir]
		if !seen {
			ok = CheckDir(e.Dir) == nil
			dirOK[e.Dir] = ok
		}
		if ok && Intact(e) {
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

// nextSeq is the sequence number of the next snapshot of the cluster
// clusterID written to a dir holding entries: the entries that do not
// count for it (another user's, another cluster's) do not move it.
func nextSeq(entries []Entry, clusterID string) int64 {
	var top int64
	for _, e := range entries {
		if e.counts(clusterID) {
			top = max(top, e.seq())
		}
	}
	return top + 1
}
