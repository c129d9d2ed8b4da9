package testbed

import (
	"os"
	"path/filepath"

	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// CorruptWAL flips one byte in the middle of the member's first WAL file,
// the way a bad sector does: etcd then dies with "walpb: crc mismatch". A
// flip that lands in a record's padding is harmless (the CRC covers only
// the data), so it flips, checks with etcd's own WAL code, and moves on to
// the next byte until the WAL is really corrupt. The member must be
// stopped.
func (c *Cluster) CorruptWAL(name string) string {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.DataDir(name), "member", "wal", "*.wal"))
	if len(files) == 0 {
		c.t.Fatalf("no WAL files for %s", name)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	defer f.Close()
	st, _ := f.Stat()
	// The used part of a preallocated WAL is at its start: flip a byte
	// well inside the records, not in the zeroed tail.
	off := usedBytes(f, st.Size()) / 2
	for try := 0; try < 64; try, off = try+1, off+1 {
		flip(c.t, f, off)
		switch repair.Inspect(nil, c.DataDir(name)).State {
		case repair.DirCorrupt:
			return files[0]
		case repair.DirLocked:
			// A running etcd holds the db: the check cannot run. 16 bytes
			// in a row are more than any record's padding (at most 7).
			for i := int64(1); i < 16; i++ {
				flip(c.t, f, off+i)
			}
			return files[0]
		}
		flip(c.t, f, off) // harmless spot: put it back
	}
	c.t.Fatalf("could not corrupt the WAL of %s", name)
	return ""
}

func flip(t TB, f *os.File, off int64) {
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("%v", err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatalf("%v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("%v", err)
	}
}

// usedBytes finds the end of the non-zero data in a preallocated file.
func usedBytes(f *os.File, size int64) int64 {
	buf := make([]byte, 64*1024)
	var last int64
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, _ := f.ReadAt(buf, off)
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				last = off + int64(i) + 1
				break
			}
		}
	}
	return last
}
