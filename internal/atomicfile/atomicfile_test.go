package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// only fails unless dir holds exactly the named entries: no temp file left.
func only(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	old := syscall.Umask(0o077) // perm is applied as given, not masked
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "marker")
	for _, c := range []struct {
		content string
		perm    os.FileMode
	}{{"one", 0o640}, {"two, longer", 0o644}, {"3", 0o600}} {
		if err := WriteFile(path, []byte(c.content), c.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != c.content {
			t.Fatalf("content %q (%v), want %q", got, err, c.content)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != c.perm {
			t.Errorf("mode %v, want %v", st.Mode().Perm(), c.perm)
		}
		only(t, dir, "marker")
	}
}

func TestWriteStreams(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.db")
	var n int64
	err := Write(path, 0o600, func(w io.Writer) error {
		var err error
		n, err = io.Copy(w, io.LimitReader(zeros{}, 1<<20))
		return err
	})
	if err != nil || n != 1<<20 {
		t.Fatalf("Write: %d bytes, %v", n, err)
	}
	if st, _ := os.Stat(path); st.Size() != 1<<20 {
		t.Errorf("size %d, want %d", st.Size(), 1<<20)
	}
	only(t, dir, "snap.db")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestFailureLeavesOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.yaml")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want the fill's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("content %q after a failed write, want old", got)
	}
	only(t, dir, "spec.yaml")
}

func TestFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o700); err != nil { // rename onto a directory fails
		t.Fatal(err)
	}
	if err := WriteFile(target, []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFile onto a directory succeeded")
	}
	only(t, dir, "target")
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile in a missing dir: %v, want ErrNotExist", err)
	}
}
