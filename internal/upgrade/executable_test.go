package upgrade

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		out  string
		want model.Build
		ok   bool
	}{
		{"etcdkeeper 0.5.0\netcd (embedded) 3.7.3\ngo go1.25.1 linux/amd64\n", model.Build{Version: "0.5.0", EtcdVersion: "3.7.3"}, true},
		{"etcdkeeper 1.2.0+3.gabc1234\netcd (embedded) 3.8.0\n", model.Build{Version: "1.2.0+3.gabc1234", EtcdVersion: "3.8.0"}, true},
		{"etcdkeeper 0.5.0\n", model.Build{}, false},
		{"Usage: something else\n", model.Build{}, false},
	}
	for _, tt := range tests {
		got, err := ParseVersion([]byte(tt.out))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %+v ok=%v", tt.out, got, err, tt.want, tt.ok)
		}
	}
}

// replace puts a new file at path by rename, as dpkg does.
func replace(t *testing.T, path string, fill func(f *os.File)) {
	t.Helper()
	tmp := path + ".dpkg-new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	fill(f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func copyOf(src string) func(f *os.File) {
	return func(f *os.File) {
		in, err := os.Open(src)
		if err != nil {
			panic(err)
		}
		defer in.Close()
		if _, err := io.Copy(f, in); err != nil {
			panic(err)
		}
	}
}

func script(body string) func(f *os.File) {
	return func(f *os.File) { _, _ = f.WriteString("#!/bin/sh\n" + body + "\n") }
}

// TestInstalled: the agent's path holds, in turn, the running image's own
// bytes (no restart), a new build (restart onto it), a file that does not
// answer (no restart, said why), and nothing (a removal: no restart).
func TestInstalled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcdkeeper")
	replace(t, path, copyOf(procSelf))
	id, err := statID(procSelf)
	if err != nil {
		t.Fatal(err)
	}
	// As if this test binary had been started from path.
	s := &Self{Path: path, Build: model.Build{Version: "0.4.0", EtcdVersion: "3.7.3"}, id: id}
	ctx := context.Background()

	if b, why := s.Installed(ctx); b != nil || why != "" {
		t.Fatalf("the running image itself at its path: Installed = %v %q, want nothing", b, why)
	}
	replace(t, path, copyOf(procSelf))
	if b, why := s.Installed(ctx); b != nil || why != "" {
		t.Fatalf("a reinstall of the same bytes: Installed = %v %q, want nothing", b, why)
	}
	replace(t, path, script(`echo "etcdkeeper 0.5.0"; echo "etcd (embedded) 3.7.3"`))
	if b, why := s.Installed(ctx); b == nil || b.Version != "0.5.0" || why != "" {
		t.Fatalf("a new build: Installed = %v %q, want 0.5.0", b, why)
	}
	replace(t, path, script(`echo "half written" >&2; exit 2`))
	b, why := s.Installed(ctx)
	if b != nil || !strings.Contains(why, "half written") {
		t.Fatalf("a file that does not answer: Installed = %v %q, want its error", b, why)
	}
	// Fixed in place with the same identity: tried again after retryProbe only.
	s.looked.at = time.Now().Add(-retryProbe)
	replace(t, path, script(`echo "etcdkeeper 0.5.1"; echo "etcd (embedded) 3.7.3"`))
	if b, why := s.Installed(ctx); b == nil || b.Version != "0.5.1" {
		t.Fatalf("the file fixed: Installed = %v %q, want 0.5.1", b, why)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if b, why := s.Installed(ctx); b != nil || why != "" {
		t.Fatalf("the file removed: Installed = %v %q, want nothing", b, why)
	}
}

func TestJournalRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if j, err := Load(path); err != nil || j.Open() {
		t.Fatalf("no journal: Load = %+v, %v; want none", j, err)
	}
	want := Journal{From: model.Build{Version: "0.4.0", EtcdVersion: "3.7.3"}, To: model.Build{Version: "0.5.0", EtcdVersion: "3.7.3"},
		Lease: 0x1234, At: time.Now().UTC().Truncate(time.Second)}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	j, err := Load(path)
	if err != nil || !j.Open() || j.Lease != want.Lease || j.To != want.To || !j.At.Equal(want.At) {
		t.Fatalf("Load = %+v, %v; want %+v, open", j, err, want)
	}
	j.Done = time.Now()
	if err := Save(path, *j); err != nil {
		t.Fatal(err)
	}
	if j, err := Load(path); err != nil || j.Open() {
		t.Fatalf("closed journal: Load = %+v, %v; want closed", j, err)
	}
	if err := os.WriteFile(path, []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("a torn journal: want an error, not a silent none")
	}
}
