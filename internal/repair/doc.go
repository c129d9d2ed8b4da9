// Package repair holds the pieces etcdkeeper uses to decide whether a local
// etcd member is damaged and to repair it safely:
//
//   - Classify: why did etcd exit (pure, from the exit status and log tail);
//   - Inspect: is the data dir on disk corrupt, checked offline with etcd's
//     own WAL and bbolt readers;
//   - Journal: crash-safe state of a repair in progress;
//   - MoveAside, ListBackups, FreeBytes, RateLimited: the only ways a repair
//     touches a data dir (it is moved, never deleted) and the guards around it.
//
// The repair itself is etcd's "replace the member" recipe (remove, move the
// data dir aside, add, start empty with --initial-cluster-state existing);
// it never restores a snapshot onto one member (field-notes §2, §3).
package repair
