// Package backup takes, verifies, keeps, restores and uploads scheduled
// snapshots of the keyspace (spec section backup:).
//
// # Who takes them: every agent, its own copy
//
// Every agent takes its own snapshots on its own schedule into its own
// host's backup.dir, as k3s does; there is no lease and no single holder.
// The reason is the disaster these files are for: when quorum is lost,
// etcd cannot elect a lease holder or say where its last snapshot went,
// and the host that held it may be the one that is gone. A copy on every
// host means that whichever hosts survive, each has a recent verified
// snapshot on its own disk, which the recovery (`etcdkeeper recover`) can
// read without any other host. The cost, N snapshots per interval instead
// of one, is kept low: each agent reads from its own member when that is a
// healthy follower (no network transfer, and the leader is spared), else
// from a healthy follower, and only as a last resort from the leader; and
// the snapshots are not synchronised, each agent keeping its own timer
// from its own start. A learner is never a source: it may lag.
//
// # Life of a snapshot
//
//  1. the source member streams it through the maintenance API into a
//     temporary name in backup.dir (".partial-..."), fsynced;
//  2. it is verified the way `etcdutl snapshot status` does it (etcdutl's
//     own code: bbolt consistency check, hash, revision, key count), and
//     the sha256 etcd appends to the stream is checked against the db;
//  3. it is renamed to <cluster>-<UTC time>-rev<revision>.db, and the dir
//     fsynced;
//  4. last, a sidecar <file>.json is written (atomically): its sha256, what
//     the verification found, who wrote it. A snapshot without a sidecar
//     is not verified: a crash between 3 and 4 leaves one, which is listed
//     as unverified and never deleted.
//
// # Deleting: only here, only our own
//
// Retention (Prune, pure and table-tested) is the only place etcdkeeper
// deletes snapshot files. A backup.dir another local user could write to
// (not owned by the agent's user or root, or group- or other-writable,
// sticky 1777 included) is refused: no snapshot is taken there, nothing
// is pruned there, nothing there is recommended (CheckDir). An entry
// counts only when it is verified, its file and sidecar are owned by the
// agent's user or root, and its sidecar's cluster ID (Source.ClusterID)
// is this cluster's: a sidecar without one (unknown) never counts, so
// that two clusters of one name sharing a dir leave each other alone.
// The entries kept in the count (the newest of the dir and this agent's
// newest backup.keep) must also still have their sidecar's sha256; each
// file is hashed once per process (cached by device, inode, size, mtime
// and ctime; a snapshot's sum is remembered when it is written), not on
// every prune. A file is deleted only when all of these hold: its name
// matches the naming pattern for this cluster; it counts; its sidecar
// says it was written by etcdkeeper's schedule for this cluster (name and
// ID) and this member, names this very file, and says it was verified;
// it is not the newest counted snapshot in the dir (by anyone); it is not
// among the newest backup.keep of this agent's own; and, read again just
// before deleting, its sha256 is still the sidecar's. A forged or foreign
// entry is never kept in the count, never recommended, never deleted.
// Files being written have a temporary name that does not match the
// pattern. "Newest" is the sidecar's sequence number (one more than the
// highest of the entries that count when it was written), then the
// revision: neither moves when the wall clock jumps, so a clock set back
// (or forward) cannot make a new snapshot look old. Snapshots saved by
// hand (`etcdkeeper backup save`) are never deleted.
//
// # Checking that it restores
//
// A backup nobody ever restored is not a backup: after the first snapshot
// of an agent's run, and then once a day, the newest snapshot is restored
// with etcdutl's restore code into a throwaway data dir
// (backup.dir/.restore-check-*, 0700) and checked offline, with no server:
// no port, no socket, nothing another local user could ask for the
// keyspace while it runs. The restored dir must pass etcd's bootstrap
// checks (repair.Inspect: WAL, snapshot record, the db's consistent
// index), and etcd's own key-value store (mvcc and its lessor, opened on
// the restored db as etcdserver does at start) is asked for the revision
// and key count it would serve; these and the hash of the key bucket are
// compared with the snapshot's. The result goes into the sidecar and the
// metrics; the throwaway dir is removed.
package backup
