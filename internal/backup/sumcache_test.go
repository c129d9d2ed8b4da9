package backup

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSumTrusted(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cur := fileID{dev: 1, ino: 2, size: 3, mtime: 4, ctime: 5}
	sum := strings.Repeat("a", 64)
	rec := func(f func(*sumRecord)) sumRecord {
		r := sumRecord{File: "c1.db", SHA256: sum, Stat: stampOf(cur), VerifiedAt: at}
		if f != nil {
			f(&r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  sumRecord
		now  time.Time
		ok   bool
		why  string
	}{
		{"the same file, hashed a minute ago", rec(nil), at.Add(time.Minute), true, ""},
		{"hashed just now", rec(nil), at, true, ""},
		{"hashed exactly sumMaxAge ago", rec(nil), at.Add(sumMaxAge), true, ""},
		{"hashed longer ago than sumMaxAge", rec(nil), at.Add(sumMaxAge + time.Second), false, "hashed more than"},
		{"hashed in the future", rec(nil), at.Add(-time.Second), false, "in the future"},
		{"another file's entry", rec(func(r *sumRecord) { r.File = "c2.db" }), at, false, "the entry is for"},
		{"no sha256", rec(func(r *sumRecord) { r.SHA256 = "" }), at, false, "no sha256"},
		{"another device", rec(func(r *sumRecord) { r.Stat.Dev++ }), at, false, "device or inode"},
		{"another inode (renamed over)", rec(func(r *sumRecord) { r.Stat.Ino++ }), at, false, "device or inode"},
		{"grown or cut", rec(func(r *sumRecord) { r.Stat.Size++ }), at, false, "size"},
		{"written, mtime moved", rec(func(r *sumRecord) { r.Stat.MtimeNs++; r.Stat.CtimeNs++ }), at, false, "mtime"},
		{"written, mtime set back: ctime moved", rec(func(r *sumRecord) { r.Stat.CtimeNs-- }), at, false, "ctime"},
		{"zero record", sumRecord{}, at, false, "the entry is for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := sumTrusted(tc.rec, "c1.db", cur, tc.now)
			if ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("sumTrusted = %v, %q; want %v, %q", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// newProcess forgets this process's sums, as a new agent process starts
// without them, and counts the files hashed from now on.
func newProcess(t *testing.T) *int {
	t.Helper()
	sums.Lock()
	clear(sums.m)
	sums.Unlock()
	n := new(int)
	hashFile = func(path string) (string, error) { *n++; return wholeSHA256(path) }
	t.Cleanup(func() { hashFile = wholeSHA256; sumNow = time.Now })
	return n
}

// snapshotEntry writes a file of random bytes and a sidecar with its
// sha256 into dir (0700) and returns its entry.
func snapshotEntry(t *testing.T, dir string) Entry {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1<<20)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	file := FileName("c1", time.Now(), 7)
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return Entry{Dir: dir, File: file, Sidecar: &Sidecar{File: file, SHA256: hex.EncodeToString(h[:]), Verified: true}}
}

// TestSumCacheAcrossProcesses: a snapshot hashed by one process is not
// read again by the next (its cache file stands for it), until the hash is
// sumMaxAge old.
func TestSumCacheAcrossProcesses(t *testing.T) {
	e := snapshotEntry(t, filepath.Join(t.TempDir(), "b"))
	hashed := newProcess(t)
	if !Intact(e) || *hashed != 1 {
		t.Fatalf("first check: intact %v after %d hashes, want true after 1", Intact(e), *hashed)
	}
	st, err := os.Lstat(e.Path() + sumSuffix)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v; want a 0600 file", st, err)
	}
	hashed = newProcess(t)
	if !Intact(e) || *hashed != 0 {
		t.Errorf("next process: intact %v after %d hashes, want true after 0", Intact(e), *hashed)
	}
	hashed = newProcess(t)
	sumNow = func() time.Time { return time.Now().Add(sumMaxAge + time.Minute) }
	if !Intact(e) || *hashed != 1 {
		t.Errorf("a day later: intact %v after %d hashes, want true after 1 (read again)", Intact(e), *hashed)
	}
}

// TestSumCacheInPlaceEdit: a snapshot changed in place after it was
// hashed — same size, its mtime set back with os.Chtimes, as cp -p or
// rsync -t would leave it — is hashed again and found damaged: its ctime
// moved.
func TestSumCacheInPlaceEdit(t *testing.T) {
	e := snapshotEntry(t, filepath.Join(t.TempDir(), "b"))
	newProcess(t)
	if !Intact(e) {
		t.Fatal("not intact before the edit")
	}
	before, err := os.Stat(e.Path())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the kernel's timestamp tick
	f, err := os.OpenFile(e.Path(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("bitflip"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(e.Path(), before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(e.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatalf("the edit left mtime %v size %d, want %v %d", after.ModTime(), after.Size(), before.ModTime(), before.Size())
	}
	hashed := newProcess(t)
	if Intact(e) {
		t.Error("a snapshot edited in place (same size, mtime reset) is trusted as intact")
	}
	if *hashed != 1 {
		t.Errorf("hashed %d times, want 1 (its cache entry is not for its ctime)", *hashed)
	}
}

// TestPlantedSumCacheIgnored: another local user (uid 65534) who could
// write into the backup dir once (mode 1777) plants, next to a snapshot
// that has since been damaged, a cache entry with the file's current stat
// and its sidecar's sha256. Neither while the dir is open nor after its
// mode is fixed (the planted file stays, owned by uid 65534) is the
// damaged snapshot trusted; nor through a planted symlink to a file of
// theirs.
func TestPlantedSumCacheIgnored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant files as uid 65534")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // uid 65534 must reach the dir
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "backups")
	e := snapshotEntry(t, dir)
	// Damaged in place, by someone who may (root): no cache entry yet.
	f, err := os.OpenFile(e.Path(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("damage"), 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Lstat(e.Path())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := idOf(info)
	forged, err := json.Marshal(sumRecord{File: e.File, SHA256: e.Sidecar.SHA256, Stat: stampOf(id), VerifiedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	plant := func(script string) {
		t.Helper()
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
		cmd.Env = append(os.Environ(), "CACHE="+e.Path()+sumSuffix, "REC="+string(forged), "OWN="+filepath.Join(dir, "theirs"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("planting as uid 65534: %v: %s", err, out)
		}
	}
	check := func(when string) {
		t.Helper()
		newProcess(t)
		if Intact(e) {
			t.Errorf("%s: the damaged snapshot is trusted through the planted cache entry", when)
		}
	}
	plant(`printf '%s\n' "$REC" > "$CACHE"`)
	check("dir 1777")
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	check("dir 0700, the planted file left")
	// A symlink to a file of theirs holding the same record, where the
	// agent's own cache file was (the sticky bit keeps them from removing
	// it themselves).
	if err := os.Remove(e.Path() + sumSuffix); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	plant(`printf '%s\n' "$REC" > "$OWN" && ln -s "$OWN" "$CACHE"`)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	check("dir 0700, a planted symlink")
}

// TestSumHashedOnceAtOnce: two checks of the same snapshot at once, with
// no cache entry yet (an agent's start: its schedule and a repair look at
// the same newest snapshot), read the file once; both get its sum.
func TestSumHashedOnceAtOnce(t *testing.T) {
	e := snapshotEntry(t, filepath.Join(t.TempDir(), "b"))
	newProcess(t)
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	hashFile = func(path string) (string, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-release
		return wholeSHA256(path)
	}
	results := make(chan bool, 2)
	go func() { results <- Intact(e) }()
	<-started
	go func() { results <- Intact(e) }()
	// The second check is given time to reach the hash under way; if it
	// comes later it finds the sum remembered: read once either way.
	time.Sleep(200 * time.Millisecond)
	close(release)
	for range 2 {
		if !<-results {
			t.Error("a check found the snapshot not intact")
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the file was read %d times, want once", n)
	}
}
