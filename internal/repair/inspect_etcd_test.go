package repair

import (
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"go.etcd.io/etcd/server/v3/storage/datadir"
)

// damageCase damages a copy of a real data dir; Inspect must call it what
// etcd makes of it: corrupt exactly when etcd fails to start.
type damageCase struct {
	name   string
	src    func(*realDirs) string // default: cluster a
	damage func(t *testing.T, dir string)
	want   DirState
	etcd   *outcome // default: fails for DirCorrupt, serves otherwise
}

func (c damageCase) wantEtcd() outcome {
	switch {
	case c.etcd != nil:
		return *c.etcd
	case c.want == DirCorrupt:
		return fails
	}
	return serves
}

func ptr[T any](v T) *T { return &v }

func damageCases() []damageCase {
	// Flip a byte in the middle of the n-th of the big entry records (1 KiB
	// values) of WAL file i (-1: the last file), at fraction q of them.
	flipEntry := func(file int, q float64) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			path := pick(walFiles(t, dir), file)
			big := bigEntries(recordSpans(t, path))
			s := big[int(q*float64(len(big)-1))]
			flipByte(t, path, s.start+(s.end-s.start)/2)
		}
	}
	// Flip byte 4 of the 8-byte length field of the middle record: the
	// record now claims more bytes than the file holds.
	flipLength := func(file int) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			path := pick(walFiles(t, dir), file)
			spans := recordSpans(t, path)
			flipByte(t, path, spans[len(spans)/2].start+4)
		}
	}
	// Cut WAL file i in the middle of its last record, as a torn write does.
	tear := func(file int) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			path := pick(walFiles(t, dir), file)
			spans := recordSpans(t, path)
			last := spans[len(spans)-1]
			truncate(t, path, last.start+(last.end-last.start)/2)
		}
	}
	db := func(dir string) string { return datadir.ToBackendFileName(dir) }
	snapDir := func(dir string) string { return datadir.ToSnapDir(dir) }

	return []damageCase{
		{name: "intact", damage: func(*testing.T, string) {}, want: DirHealthy},
		{name: "wal/flip entry first file 25%", damage: flipEntry(0, 0.25), want: DirCorrupt},
		{name: "wal/flip entry third file 50%", damage: flipEntry(2, 0.5), want: DirCorrupt},
		{name: "wal/flip entry fifth file 75%", damage: flipEntry(4, 0.75), want: DirCorrupt},
		{name: "wal/flip entry last file 50%", damage: flipEntry(-1, 0.5), want: DirCorrupt},
		{name: "wal/flip last entry of last file", damage: flipEntry(-1, 1), want: DirCorrupt},
		{name: "wal/flip length field first file", damage: flipLength(0), want: DirCorrupt},
		// etcd reads an oversized length as a torn write and cuts the last
		// file there, dropping committed records after it; the db is then
		// ahead of the WAL and etcd never becomes ready.
		{name: "wal/flip length field last file", damage: flipLength(-1), want: DirCorrupt, etcd: ptr(hangs)},
		{name: "wal/torn tail of last file", damage: tear(-1), want: DirTornTail},
		{name: "wal/torn tail of an earlier file", damage: tear(2), want: DirCorrupt},
		{name: "db/zeroed", damage: func(t *testing.T, d string) { zeroFile(t, db(d)) }, want: DirCorrupt},
		// The db file is preallocated well past its data; cut into the data.
		{name: "db/truncated to half its data", damage: func(t *testing.T, d string) { truncate(t, db(d), dataSize(t, db(d))/2) }, want: DirCorrupt},
		{name: "db/truncated to zero", damage: func(t *testing.T, d string) { truncate(t, db(d), 0) }, want: DirCorrupt},
		{name: "db/deleted", damage: func(t *testing.T, d string) { removeGlob(t, db(d)) }, want: DirCorrupt},
		{name: "snap/dir emptied", damage: func(t *testing.T, d string) { removeGlob(t, filepath.Join(snapDir(d), "*")) }, want: DirCorrupt},
		// etcd v3.7 rebuilds its raft snapshot from the WAL and the db; it
		// does not read *.snap files on start.
		{name: "snap/only .snap files deleted", damage: func(t *testing.T, d string) { removeGlob(t, filepath.Join(snapDir(d), "*.snap")) }, want: DirHealthy},
		// Cluster b never took a snapshot: its WAL starts at index 0 and etcd
		// replays all of it into a new db.
		{name: "db/deleted before first snapshot", src: func(f *realDirs) string { return f.b },
			damage: func(t *testing.T, d string) { removeGlob(t, db(d)) }, want: DirHealthy},
		{name: "other cluster", src: func(f *realDirs) string { return f.b }, damage: func(*testing.T, string) {}, want: DirHealthy},
		{name: "empty dir", damage: func(t *testing.T, d string) { removeGlob(t, filepath.Join(d, "*")) }, want: DirEmpty},
		{name: "missing dir", damage: func(t *testing.T, d string) { removeGlob(t, d) }, want: DirMissing},
		// A new member on a db that already applied entries: etcd skips them
		// and cannot publish itself.
		{name: "db without WAL", damage: func(t *testing.T, d string) { removeGlob(t, datadir.ToWALDir(d)) }, want: DirCorrupt, etcd: ptr(hangs)},
	}
}

// TestInspectRealDataDirs damages copies of a real data dir, checks what
// Inspect says, then starts etcd on the copy: it must fail exactly for the
// corrupt ones, and Classify must call that failure corrupt.
func TestInspectRealDataDirs(t *testing.T) {
	f := realFixture(t)
	for _, c := range damageCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := f.a
			if c.src != nil {
				src = c.src(f)
			}
			dir := filepath.Join(t.TempDir(), "data")
			copyDir(t, src, dir)
			c.damage(t, dir)

			r := Inspect(nil, dir)
			if r.State != c.want {
				t.Fatalf("Inspect = %v (%s), want %v", r.State, r.Reason, c.want)
			}
			t.Logf("Inspect: %v: %s", r.State, r.Reason)

			run := runEtcd(t, dir)
			v := Classify(run.exit)
			if run.outcome != c.wantEtcd() {
				t.Fatalf("etcd %v, want %v; exit %+v; verdict %+v\nlog tail:\n%s",
					run.outcome, c.wantEtcd(), run.exit.Code, v, tail(run.log))
			}
			// etcd that failed by itself must be classified corrupt; one we
			// stopped with SIGTERM, as a clean stop.
			wantClass := ClassNone
			if run.outcome == fails {
				wantClass = ClassCorrupt
			}
			if v.Class != wantClass {
				t.Fatalf("Classify(etcd's exit) = %+v, want %v\nlog tail:\n%s", v, wantClass, tail(run.log))
			}
			t.Logf("etcd %v; Classify: %v: %s", run.outcome, v.Class, v.Reason)
		})
	}
}

func TestInspectReportsIdentity(t *testing.T) {
	f := realFixture(t)
	a, b := Inspect(nil, f.a), Inspect(nil, f.b)
	if a.ClusterID != f.clusterA || a.MemberID != f.memberA {
		t.Errorf("a: cluster %x member %x, want %x %x", a.ClusterID, a.MemberID, f.clusterA, f.memberA)
	}
	if b.ClusterID != f.clusterB || f.clusterA == f.clusterB {
		t.Errorf("b: cluster %x, want %x (a is %x)", b.ClusterID, f.clusterB, f.clusterA)
	}
	if a.SnapshotIndex == 0 || a.ConsistentIndex < a.SnapshotIndex || a.DBSize == 0 {
		t.Errorf("a: snapshot %d, consistent index %d, db size %d", a.SnapshotIndex, a.ConsistentIndex, a.DBSize)
	}
	// How far the data goes, for choosing a recovery source: a fresh
	// cluster is at revision 1, each put adds one.
	if a.Revision != 601 || b.Revision != 11 {
		t.Errorf("revisions a %d b %d, want 601 and 11 (600 and 10 puts)", a.Revision, b.Revision)
	}
	if a.Term == 0 || a.CommitIndex < a.ConsistentIndex || a.LastIndex < a.CommitIndex {
		t.Errorf("a: term %d, commit %d, last index %d, consistent index %d", a.Term, a.CommitIndex, a.LastIndex, a.ConsistentIndex)
	}
}

// A running etcd holds the db's flock: that is DirLocked, never corrupt.
func TestInspectWhileEtcdRuns(t *testing.T) {
	f := realFixture(t)
	if f.whileRunning.State != DirLocked {
		t.Fatalf("Inspect while etcd runs = %v (%s), want locked", f.whileRunning.State, f.whileRunning.Reason)
	}
}

func pick(paths []string, i int) string {
	if i < 0 {
		return paths[len(paths)+i]
	}
	return paths[i]
}

// dataSize is the db size its meta page claims (bbolt's high-water mark).
func dataSize(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

func tail(log string) string {
	lines := lastLines(log, 12)
	out := ""
	for _, l := range lines {
		out += "  " + oneLine(l) + "\n"
	}
	return out
}

// TestInspectWALFirst: with the WAL proving corruption, the bbolt walk of
// the db is skipped (on a large db it is most of the inspection's time):
// a data dir whose WAL and db are both damaged reports the WAL, with the
// identity the WAL still gave. With a healthy WAL the db is still walked.
func TestInspectWALFirst(t *testing.T) {
	f := realFixture(t)
	damageDB := func(t *testing.T, dir string) {
		zeroFile(t, datadir.ToBackendFileName(dir))
	}
	both := filepath.Join(t.TempDir(), "both")
	copyDir(t, f.a, both)
	damageCases()[1].damage(t, both) // wal/flip entry first file 25%
	damageDB(t, both)
	r := Inspect(nil, both)
	if r.State != DirCorrupt || !strings.Contains(r.Reason, "WAL") || strings.Contains(r.Reason, "database") {
		t.Errorf("WAL and db damaged: %v (%s), want corrupt by the WAL, the db not walked", r.State, r.Reason)
	}
	if r.DBSize == 0 {
		t.Errorf("WAL and db damaged: db size 0, want the file's size")
	}

	walOnly := filepath.Join(t.TempDir(), "wal-only")
	copyDir(t, f.a, walOnly)
	damageCases()[1].damage(t, walOnly)
	r = Inspect(nil, walOnly)
	if r.State != DirCorrupt || r.Revision != 601 || r.ConsistentIndex == 0 {
		t.Errorf("WAL damaged, db intact: %v, revision %d, consistent index %d, want corrupt, revision 601 and the index still read from the db",
			r.State, r.Revision, r.ConsistentIndex)
	}

	dbOnly := filepath.Join(t.TempDir(), "db-only")
	copyDir(t, f.a, dbOnly)
	damageDB(t, dbOnly)
	r = Inspect(nil, dbOnly)
	if r.State != DirCorrupt || !strings.Contains(r.Reason, "database") {
		t.Errorf("db damaged, WAL intact: %v (%s), want corrupt by the database", r.State, r.Reason)
	}
	if r.ClusterID != f.clusterA || r.MemberID != f.memberA {
		t.Errorf("db damaged, WAL intact: identity %x/%x, want %x/%x from the WAL", r.ClusterID, r.MemberID, f.clusterA, f.memberA)
	}
}
