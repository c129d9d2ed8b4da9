package spec

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
)

// TestEncryptionSpec: backup.encryption as validate reads it, the
// recipients inline and in recipientsFile, each error at its line with
// what to do, and the warnings.
func TestEncryptionSpec(t *testing.T) {
	key := func() (string, string) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		return id.Recipient().String(), id.String()
	}
	r1, id1 := key()
	r2, _ := key()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("good", "# made by run-local.sh\n\n"+r1+"\n", 0o644)
	write("two", r1+"\n"+r2+"\n", 0o644)
	write("bad", r1+"\nage1notakey\n", 0o644)
	write("twice", r1+"\n"+r1+"\n", 0o644)
	write("empty", "# no key yet\n", 0o644)
	write("shared", r1+"\n", 0o664)
	write("id1", id1+"\n", 0o600)
	if err := os.MkdirAll(filepath.Join(dir, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	write("open/r", r1+"\n", 0o644)
	if err := os.Symlink(filepath.Join(dir, "good"), filepath.Join(dir, "symlink")); err != nil {
		t.Fatal(err)
	}

	const members = "cluster: {name: c}\nmembers:\n  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}\nbackup:\n  encryption:\n"
	for _, tt := range []struct {
		name, enc string
		// err: a part of the error, which is at spec.yaml:line; warn: a
		// part of the only warning ("": none).
		line      int
		err, warn string
	}{
		{name: "recipients", enc: "    recipients: [" + r1 + "]\n"},
		{name: "not a recipient", enc: "    recipients: [" + r1 + ", age1nope]\n", line: 6, err: `backup.encryption.recipients[1]: "age1nope": not an age X25519 recipient`},
		{name: "listed twice", enc: "    recipients: [" + r1 + ", " + r1 + "]\n", line: 6, err: "listed twice"},
		{name: "plaintext beside recipients", enc: "    recipients: [" + r1 + "]\n    plaintext: true\n", line: 7, err: "plaintext: true beside recipients"},
		{name: "plaintext", enc: "    plaintext: true\n", warn: "backup.encryption.plaintext: true: every snapshot"},
		{name: "neither", enc: "    identityFile: id1\n", warn: "NO ENCRYPTION"},
		{name: "recipients file", enc: "    recipientsFile: good\n"},
		{name: "recipients file and inline", enc: "    recipients: [" + r2 + "]\n    recipientsFile: good\n    identityFile: id1\n"},
		{name: "identity of the file's key", enc: "    recipientsFile: good\n    identityFile: id1\n"},
		{name: "identity of no recipient", enc: "    recipients: [" + r2 + "]\n    identityFile: id1\n", warn: "none of its keys is one of backup.encryption.recipients"},
		{name: "two in the file", enc: "    recipientsFile: two\n"},
		{name: "no such file", enc: "    recipientsFile: absent\n", warn: "every host that takes snapshots needs it: the age1... recipients, one a line): this host takes no snapshot until it is put right"},
		{name: "a line that is no key", enc: "    recipientsFile: bad\n", warn: `line 2: "age1notakey": not an age X25519 recipient`},
		{name: "a key twice in the file", enc: "    recipientsFile: twice\n", warn: "line 2: " + `"` + r1 + `": listed twice`},
		{name: "no key in the file", enc: "    recipientsFile: empty\n", warn: "no recipient in it: snapshots are never taken in plaintext"},
		{name: "group can write it", enc: "    recipientsFile: shared\n", warn: "refused: " + filepath.Join(dir, "shared") + " is writable by group or others (mode -rw-rw-r--)"},
		{name: "others can write its dir", enc: "    recipientsFile: open/r\n", warn: "open is writable by group or others (mode drwxrwxrwx): another user could change it (chmod go-w"},
		{name: "a symlink", enc: "    recipientsFile: symlink\n", warn: "refused: " + filepath.Join(dir, "symlink") + " is a symlink"},
		{name: "{name} in it", enc: "    recipientsFile: '{name}.r'\n", line: 6, err: "{name} is not expanded here"},
		{name: "plaintext beside the file", enc: "    recipientsFile: good\n    plaintext: true\n", line: 7, err: "plaintext: true beside recipients"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(members+tt.enc), filepath.Join(dir, "spec.yaml"))
			if tt.err != "" {
				at := filepath.Join(dir, "spec.yaml") + ":" + strconv.Itoa(tt.line) + ":"
				if err == nil || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q ... %q", err, at, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.warn == "" && len(s.Warnings) != 0:
				t.Errorf("warnings %v, want none", s.Warnings)
			case tt.warn != "" && (len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0].Error(), tt.warn)):
				t.Errorf("warnings %v, want one with %q", s.Warnings, tt.warn)
			}
			if strings.HasPrefix(tt.enc, "    recipientsFile: ") && tt.warn != "" {
				if !strings.Contains(s.Warnings[0].Error(), "spec.yaml:6:") || !strings.Contains(s.Warnings[0].Error(), "this host takes no snapshot until it is put right") {
					t.Errorf("warning %v: not at the line, or does not say what it means", s.Warnings[0])
				}
			}
			if e := s.Backup.Encryption; e.Encrypts() == (tt.name == "plaintext" || tt.name == "neither") {
				t.Errorf("Encrypts() = %v", e.Encrypts())
			}
		})
	}
}
