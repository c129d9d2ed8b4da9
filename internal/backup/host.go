package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// SnapshotDirs are the members' backup dirs, each once, in spec order:
// where `backup list` looks on a host (one dir when backup.dir has no
// {name}).
func SnapshotDirs(s *spec.Spec) []string {
	var dirs []string
	for _, m := range s.Members {
		if !slices.Contains(dirs, m.SnapshotDir) {
			dirs = append(dirs, m.SnapshotDir)
		}
	}
	return dirs
}

// ListDirs lists the snapshots of cluster in each of dirs, newest first.
// A dir another user can write to is listed too (its entries are shown,
// never counted elsewhere): warnings says so, one per dir.
func ListDirs(dirs []string, cluster string) (entries []Entry, warnings []error, err error) {
	var errs []error
	for _, d := range dirs {
		es, err := List(d, cluster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if werr := CheckDir(d); werr != nil && !errors.Is(werr, fs.ErrNotExist) {
			warnings = append(warnings, werr)
		}
		entries = append(entries, es...)
	}
	return sorted(entries), warnings, errors.Join(errs...)
}

// SaveDir is where `backup save` keeps a snapshot taken by hand: out when
// given; else the backup.dir of the member this host runs (isMember);
// else, on a host that runs no member, the one backup.dir every member
// shares; with a per-member backup.dir ({name}) there is no such dir, and
// guessing one would put the file where no agent and no `backup list`
// for that member looks: --out (or --name) must say.
func SaveDir(s *spec.Spec, out string, self spec.Member, isMember bool) (string, error) {
	switch dirs := SnapshotDirs(s); {
	case out != "":
		return out, nil
	case isMember:
		return self.SnapshotDir, nil
	case len(dirs) == 1:
		return dirs[0], nil
	default:
		return "", fmt.Errorf("this host runs no member of the spec (members: %v) and backup.dir is per member (%v): pass --out DIR, or --name", s.Names(), dirs)
	}
}
