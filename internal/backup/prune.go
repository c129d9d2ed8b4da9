package backup

// Owner is the agent whose snapshots retention may delete.
type Owner struct {
	Cluster string
	Member  string
}

// Prune chooses which snapshots retention deletes: of the entries that
// owner's schedule wrote and verified (Sidecar.owns), all but the newest
// keep; never the newest verified entry of the dir, whoever wrote it;
// never an entry without a verified sidecar. It is pure: the caller
// checks each file's sha256 again before deleting it (removeSnapshot).
func Prune(entries []Entry, owner Owner, keep int) []Entry {
	keep = max(keep, 1)
	var del []Entry
	newestSeen, kept := false, 0
	for _, e := range sorted(entries) {
		if !e.Verified() {
			continue
		}
		newest := !newestSeen
		newestSeen = true
		if _, ok := parseName(owner.Cluster, e.File); !ok || !e.Sidecar.owns(e.File, owner.Cluster, owner.Member) {
			continue
		}
		if newest || kept < keep {
			kept++
			continue
		}
		del = append(del, e)
	}
	return del
}
