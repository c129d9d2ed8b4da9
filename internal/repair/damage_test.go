package repair

// Ways to damage a copy of a real data dir, for the Inspect tests.

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
)

// copyDir copies a data dir, keeping runs of zeros as holes: WAL segments
// are mostly preallocated zeros.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm())
		}
		return copySparse(p, target, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func copySparse(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	defer out.Close()
	buf, zero := make([]byte, 64*1024), make([]byte, 64*1024)
	var size int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				_, err2 := out.Seek(int64(n), io.SeekCurrent)
				if err2 != nil {
					return err2
				}
			} else if _, err2 := out.Write(buf[:n]); err2 != nil {
				return err2
			}
			size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out.Truncate(size)
		}
		if err != nil {
			return err
		}
	}
}

// walFiles lists the fixture's WAL files in order.
func walFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	names, err := walFileNames(datadir.ToWALDir(dataDir))
	if err != nil || len(names) == 0 {
		t.Fatalf("WAL files of %s: %v %v", dataDir, names, err)
	}
	for i, n := range names {
		names[i] = filepath.Join(datadir.ToWALDir(dataDir), n)
	}
	return names
}

// span is one WAL record in its file: [start, end) including its 8-byte
// length field and padding.
type span struct {
	start, end int64
	typ        int64
}

// recordSpans decodes one WAL file and returns where its records are.
func recordSpans(t *testing.T, path string) []span {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := wal.NewDecoder(fileutil.NewFileReader(f))
	var spans []span
	rec := &walpb.Record{}
	for {
		start := d.LastOffset()
		if err := d.Decode(rec); err != nil {
			return spans
		}
		if rec.GetType() == wal.CrcType {
			d.UpdateCRC(rec.GetCrc())
		}
		spans = append(spans, span{start: start, end: d.LastOffset(), typ: rec.GetType()})
	}
}

// bigEntries returns the entry records large enough to hold a 1 KiB value.
func bigEntries(spans []span) []span {
	var out []span
	for _, s := range spans {
		if s.typ == wal.EntryType && s.end-s.start > 512 {
			out = append(out, s)
		}
	}
	return out
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func zeroFile(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, st.Size()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func removeGlob(t *testing.T, pattern string) {
	t.Helper()
	matches, _ := filepath.Glob(pattern)
	if len(matches) == 0 {
		t.Fatalf("nothing matches %s", pattern)
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			t.Fatal(err)
		}
	}
}
