package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	big := filepath.Join(dir, "big")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(ok, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte("abcd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 3); err != nil || string(b) != "abc" {
		t.Errorf("Read(ok) = %q, %v", b, err)
	}
	for path, want := range map[string]error{big: ErrTooLarge, "/dev/zero": ErrNotRegular, dir: ErrNotRegular, fifo: ErrNotRegular} {
		if _, err := Read(path, 3); !errors.Is(err, want) {
			t.Errorf("Read(%s) = %v, want %v", path, err, want)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing"), 3); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want ErrNotExist", err)
	}
}
