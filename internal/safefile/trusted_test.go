package safefile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadTrusted: a file whose content decides who reads secrets is read
// only when no user but root and ours can change it: not the file, not a
// directory on its way (symlinks resolved), not by a symlink swapped in;
// and another user who could is tested as that user (uid 65534), writing
// the file through the hole each case leaves.
func TestReadTrusted(t *testing.T) {
	root := t.TempDir()
	// uid 65534 must reach the files, as it could on a real host.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	put := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("mine\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := mk("good", 0o755)
	mk("open", 0o777)
	deep := mk("open/deep", 0o755) // its parent is open
	sticky := mk("sticky", os.ModeSticky|0o777)
	link := filepath.Join(root, "via-link")
	if err := os.Symlink(deep, link); err != nil {
		t.Fatal(err)
	}
	put(good, "f", 0o644)
	put(good, "shared", 0o664)
	put(deep, "f", 0o644)
	put(sticky, "f", 0o644)
	if err := os.Symlink(filepath.Join(deep, "f"), filepath.Join(good, "symlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(good, filepath.Join(root, "open", "to-good")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(good, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	if asRoot {
		put(good, "theirs", 0o644)
		if err := os.Chown(filepath.Join(good, "theirs"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, path string
		// want: nil, ErrUntrusted, or another error's text.
		want error
		text string
		// attack: a shell command uid 65534 runs, with $P the path, that
		// changes what is read (it must succeed: the hole is real).
		attack string
	}{
		{name: "ours, in our dirs", path: filepath.Join(good, "f")},
		{name: "in a root-owned sticky dir", path: filepath.Join(sticky, "f")},
		{name: "group can write it", path: filepath.Join(good, "shared"), want: ErrUntrusted},
		{name: "a dir on its way others can write", path: filepath.Join(deep, "f"), want: ErrUntrusted,
			attack: `mv "$(dirname "$P")" "$(dirname "$P").old" && mkdir "$(dirname "$P")" && echo theirs > "$P"`},
		{name: "the same dir by a symlink", path: filepath.Join(link, "f"), want: ErrUntrusted},
		{name: "a symlink to a file they can replace", path: filepath.Join(good, "symlink"), want: ErrUntrusted, text: "is a symlink"},
		{name: "a symlink to our dir, in a dir others can write", path: filepath.Join(root, "open", "to-good", "f"), want: ErrUntrusted,
			attack: `ln -sfn "$(dirname "$(dirname "$(dirname "$P")")")/sticky" "$(dirname "$P")"`},
		{name: "a FIFO (never blocks)", path: filepath.Join(good, "fifo"), want: ErrNotRegular},
		{name: "absent", path: filepath.Join(good, "absent"), want: os.ErrNotExist},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadTrusted(tt.path, 1<<10)
			switch {
			case tt.want == nil && tt.text == "":
				if err != nil || string(b) != "mine\n" {
					t.Fatalf("read %q, %v", b, err)
				}
			case tt.text != "" && (err == nil || !strings.Contains(err.Error(), tt.text)):
				t.Fatalf("err = %v, want %q", err, tt.text)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			t.Logf("%v", err)
			if tt.attack == "" || !asRoot {
				return
			}
			if _, err := exec.LookPath("setpriv"); err != nil {
				t.Log("no setpriv: the attack as uid 65534 is not run")
				return
			}
			cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", tt.attack)
			cmd.Env = append(os.Environ(), "P="+tt.path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the attack as uid 65534 failed (no hole to refuse?): %v: %s", err, out)
			}
			if b, err := ReadTrusted(tt.path, 1<<10); err == nil {
				t.Fatalf("after the attack: read %q", b)
			}
		})
	}
	t.Run("relative", func(t *testing.T) {
		t.Chdir(filepath.Join(root, "open"))
		if _, err := ReadTrusted(filepath.Join("deep", "f"), 1<<10); !errors.Is(err, ErrUntrusted) {
			t.Errorf("deep/f from a dir others can write: %v", err)
		}
	})
	if asRoot {
		if _, err := ReadTrusted(filepath.Join(good, "theirs"), 1<<10); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("a file of uid 65534: %v", err)
		}
	}
}
