package repair

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// These run under -short: no etcd server, only etcd's WAL writer and bbolt.

func TestInspectLayout(t *testing.T) {
	root := t.TempDir()
	mkdir := func(p string) string {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := mkdir(filepath.Join(root, "empty"))
	noWAL := mkdir(filepath.Join(root, "nowal"))
	mkdir(datadir.ToWALDir(noWAL))
	freshDB := mkdir(filepath.Join(root, "freshdb"))
	writeDB(t, datadir.ToBackendFileName(freshDB), 0)
	staleDB := mkdir(filepath.Join(root, "staledb"))
	writeDB(t, datadir.ToBackendFileName(staleDB), 42)

	for _, tt := range []struct {
		name, dir string
		want      DirState
	}{
		{"missing", filepath.Join(root, "nope"), DirMissing},
		{"empty", empty, DirEmpty},
		{"wal dir without wal files", noWAL, DirEmpty},
		// etcd creates the db before the WAL: a failed first start leaves one.
		{"db that applied nothing, no WAL", freshDB, DirEmpty},
		{"db that applied entries, no WAL", staleDB, DirCorrupt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := Inspect(nil, tt.dir); r.State != tt.want {
				t.Fatalf("Inspect = %v (%s), want %v", r.State, r.Reason, tt.want)
			}
		})
	}
}

func TestInspectSyntheticWAL(t *testing.T) {
	dir := t.TempDir()
	writeWAL(t, dir, 0xc1, 0xa1, 10)
	r := Inspect(zap.NewNop(), dir)
	if r.State != DirHealthy || r.ClusterID != 0xc1 || r.MemberID != 0xa1 {
		t.Fatalf("Inspect = %+v, want healthy, cluster c1, member a1", r)
	}

	// The db already applied index 42 but the WAL ends at 10.
	writeDB(t, datadir.ToBackendFileName(dir), 42)
	if r := Inspect(nil, dir); r.State != DirCorrupt {
		t.Fatalf("db ahead of WAL: Inspect = %v (%s), want corrupt", r.State, r.Reason)
	}
}

// A process holding the db's exclusive flock (as a running etcd does) makes
// the dir DirLocked, not corrupt, and Inspect gives up quickly.
func TestInspectLockedDB(t *testing.T) {
	dir := t.TempDir()
	writeWAL(t, dir, 1, 2, 3)
	path := datadir.ToBackendFileName(dir)
	writeDB(t, path, 1)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	r := Inspect(nil, dir)
	if r.State != DirLocked {
		t.Fatalf("Inspect = %v (%s), want locked", r.State, r.Reason)
	}
	if d := time.Since(start); d > 5*dbLockTimeout {
		t.Errorf("Inspect of a locked dir took %v", d)
	}
}

func TestInspectUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads everything")
	}
	dir := t.TempDir()
	writeWAL(t, dir, 1, 2, 3)
	if err := os.Chmod(datadir.ToWALDir(dir), 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(datadir.ToWALDir(dir), 0o700)
	if r := Inspect(nil, dir); r.State != DirUnreadable {
		t.Fatalf("Inspect = %v (%s), want unreadable", r.State, r.Reason)
	}
}

// Running as root the permission case cannot be made for real, nor can a
// failing disk; the mapping is what matters: permission, I/O and resource
// errors never read as corruption.
func TestStateOf(t *testing.T) {
	pathErr := func(op string, errno syscall.Errno) error {
		return &fs.PathError{Op: op, Path: "/var/lib/etcd/member/snap/db", Err: errno}
	}
	for _, tt := range []struct {
		err  error
		want DirState
	}{
		{fmt.Errorf("WAL: listing x: %w", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), DirUnreadable},
		{fmt.Errorf("database: %w", errLocked), DirLocked},
		{fmt.Errorf("WAL: %w", io.ErrUnexpectedEOF), DirCorrupt},
		{fmt.Errorf("WAL: reading to the end: %w: in file 'x.wal' at position: 8", walpb.ErrCRCMismatch), DirCorrupt},
		{errors.New("checking the database panicked: runtime error: invalid memory address or nil pointer dereference"), DirCorrupt},

		// The disk or the file system failed: errors that keep their errno
		// (os and etcd's WAL code wrap with %w) ...
		{fmt.Errorf("database: reading: %w", pathErr("read", syscall.EIO)), DirUnreadable},
		{fmt.Errorf("WAL: verifying from snapshot index 0: %w: in file 'x.wal' at position: 0", pathErr("read", syscall.EIO)), DirUnreadable},
		{fmt.Errorf("WAL: %w", pathErr("open", syscall.ESTALE)), DirUnreadable},
		{fmt.Errorf("stat data dir: %w", pathErr("stat", syscall.ENOTCONN)), DirUnreadable},
		// ... and the same when a library formatted it away (bbolt's
		// "mmap allocate error: %s", an error printed with %v).
		{errors.New("failed to open database x: read x: input/output error"), DirUnreadable},
		{errors.New("WAL: x: stale file handle"), DirUnreadable},
		// The inspector itself ran out of file descriptors or memory.
		{fmt.Errorf("WAL: %w", pathErr("open", syscall.EMFILE)), DirUnreadable},
		{fmt.Errorf("WAL: %w", pathErr("open", syscall.ENFILE)), DirUnreadable},
		{fmt.Errorf("failed to open database x: %w", syscall.ENOMEM), DirUnreadable},
		{errors.New("failed to open database x: mmap allocate error: cannot allocate memory"), DirUnreadable},
		{errors.New("failed to open database x: mmap too large"), DirUnreadable},
	} {
		if got := stateOf(tt.err); got != tt.want {
			t.Errorf("stateOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A real EIO from read(2): /proc/self/mem at offset 0 is unmapped memory.
// Reading the db through read(2) before bbolt maps it turns a disk error
// into this, not into a SIGBUS inside bbolt.
func TestReadThroughEIO(t *testing.T) {
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	err = readThrough(f)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("readThrough(/proc/self/mem) = %v, want EIO", err)
	}
	if got := stateOf(fmt.Errorf("database: reading %s: %w", f.Name(), err)); got != DirUnreadable {
		t.Fatalf("stateOf(%v) = %v, want unreadable", err, got)
	}
}

func TestDirStateString(t *testing.T) {
	for s, want := range map[DirState]string{DirMissing: "missing", DirEmpty: "empty", DirHealthy: "healthy",
		DirTornTail: "torn-tail", DirLocked: "locked", DirUnreadable: "unreadable", DirCorrupt: "corrupt", DirState(9): "DirState(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}

// writeWAL writes a WAL the way etcd's bootstrap does (wal.Create with the
// member's metadata), then n entries and a HardState committing them.
func writeWAL(t *testing.T, dataDir string, clusterID, memberID uint64, n uint64) {
	t.Helper()
	if err := os.MkdirAll(datadir.ToMemberDir(dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	meta, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: new(memberID), ClusterID: new(clusterID)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zap.NewNop(), datadir.ToWALDir(dataDir), meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ents []*raftpb.Entry
	for i := uint64(1); i <= n; i++ {
		ents = append(ents, &raftpb.Entry{Term: new(uint64(1)), Index: new(i), Data: []byte("x")})
	}
	if err := w.Save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(n)}, ents); err != nil {
		t.Fatal(err)
	}
}

// writeDB writes a bbolt db with etcd's meta bucket and consistent index.
func writeDB(t *testing.T, path string, consistentIndex uint64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(schema.Meta.Name())
		if err != nil || consistentIndex == 0 {
			return err
		}
		return b.Put(schema.MetaConsistentIndexKeyName, binary.BigEndian.AppendUint64(nil, consistentIndex))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInspectDBAheadNotWalked: a db that has applied more than the WAL
// holds is corrupt data whatever its other pages hold, so its read-through
// and bbolt's walk (a second per GB) are skipped: a dir whose db is ahead
// of its WAL and also has a damaged page elsewhere reports the WAL's lost
// entries, not the damaged page.
func TestInspectDBAheadNotWalked(t *testing.T) {
	dir := t.TempDir()
	writeWAL(t, dir, 0xc1, 0xa1, 10)
	path := datadir.ToBackendFileName(dir)
	writeDB(t, path, 42)
	// A bucket of its own, big enough for a branch page at its root, that
	// only the walk reads; then that page zeroed.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put(fmt.Appendf(nil, "key-%05d", i), make([]byte, 64)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			root, pageSize = int64(tx.Bucket([]byte("other")).Root()), int64(db.Info().PageSize)
			return nil
		})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, pageSize), root*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r := Inspect(nil, dir)
	if r.State != DirCorrupt || !strings.Contains(r.Reason, "the WAL lost entries") {
		t.Errorf("db ahead of the WAL with a damaged page: %v (%s), want corrupt by the WAL's lost entries, the db not walked", r.State, r.Reason)
	}
	if r.ConsistentIndex != 42 {
		t.Errorf("consistent index %d, want 42 (still read from the db)", r.ConsistentIndex)
	}
}
