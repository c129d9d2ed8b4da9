package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rec struct {
	A int    `json:"a"`
	B string `json:"b"`
}

// TestRoundTrip: what Save writes, Load reads back; the file is 0600; no
// file is not found, and leaves v as it was.
func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.json")
	var v rec
	if found, err := Load(path, &v); found || err != nil {
		t.Fatalf("no file: found %v, %v", found, err)
	}
	if err := Save(path, rec{A: 1, B: "b"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != Mode {
		t.Fatalf("mode %v, %v; want %v", fi.Mode(), err, os.FileMode(Mode))
	}
	if found, err := Load(path, &v); !found || err != nil || v != (rec{A: 1, B: "b"}) {
		t.Fatalf("Load = %v %v %+v", found, err, v)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("removing a removed file: %v", err)
	}
}

// TestLoadRefusesUntrusted: a state file another local user could have
// written (owned by uid 65534, or group/other-writable) is refused, with
// its path, and not read; one that does not parse names the file too.
func TestLoadRefusesUntrusted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var v rec
	if _, err := Load(write("open.json", `{"a":2}`, 0o666), &v); err == nil || !strings.Contains(err.Error(), "writable by group or others") || v.A != 0 {
		t.Errorf("a world-writable file: %v, read %+v", err, v)
	}
	if _, err := Load(write("bad.json", `{"a":`, 0o600), &v); err == nil || !strings.Contains(err.Error(), "bad.json does not parse") {
		t.Errorf("a file that does not parse: %v", err)
	}
	if os.Geteuid() == 0 {
		p := write("nobody.json", `{"a":3}`, 0o600)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p, &v); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") || v.A != 0 {
			t.Errorf("a file of uid 65534: %v, read %+v", err, v)
		}
	}
}
