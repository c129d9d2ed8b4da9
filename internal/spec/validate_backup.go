package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
)

// validBucket is S3's rule for bucket names that path-style addressing
// and every implementation accept.
var validBucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// checkBackup checks backup: as written, before defaults.
func (d *doc) checkBackup(b Backup) {
	d.checkPath("backup.dir", b.Dir)
	if d.given["backup.interval"] && !d.broken["backup.interval"] && b.Interval.Duration < 0 {
		d.errorf(d.line("backup.interval"), "backup.interval: %s: must be 0 (no scheduled snapshots) or more, e.g. 1h", b.Interval)
	}
	d.checkAtLeast("backup.keep", int64(b.Keep), 1, "the newest verified snapshot is always kept; set backup.interval: 0 to take none")
	if d.given["backup.drillInterval"] && !d.broken["backup.drillInterval"] && b.DrillInterval.Duration < 0 {
		d.errorf(d.line("backup.drillInterval"), "backup.drillInterval: %s: must be 0 (no restore drills) or more, e.g. 24h", b.DrillInterval)
	}
	d.checkEncryption(b)
	s3 := b.S3
	if s3 == (S3{}) {
		return
	}
	line := d.line("backup.s3.endpoint", "backup.s3")
	switch u, err := url.Parse(s3.Endpoint); {
	case s3.Endpoint == "":
		d.errorf(line, "backup.s3.endpoint: missing: the S3 service's URL, e.g. https://s3.example.net")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
		d.errorf(line, "backup.s3.endpoint: %s: must be http:// or https:// with a host and nothing after it, e.g. https://s3.example.net", quote(s3.Endpoint))
	}
	switch {
	case s3.Bucket == "":
		d.errorf(d.line("backup.s3.bucket", "backup.s3"), "backup.s3.bucket: missing: the bucket the snapshots go to")
	case !validBucket.MatchString(s3.Bucket) || strings.Contains(s3.Bucket, ".."):
		d.errorf(d.line("backup.s3.bucket"), "backup.s3.bucket: %s: 3 to 63 lowercase letters, digits, '.' and '-'", quote(s3.Bucket))
	}
	if strings.HasPrefix(s3.Prefix, "/") {
		d.errorf(d.line("backup.s3.prefix"), "backup.s3.prefix: %s: must not start with /: object names are relative to the bucket", quote(s3.Prefix))
	}
	if s3.CredentialsFile == "" {
		d.errorf(d.line("backup.s3.credentialsFile", "backup.s3"), "backup.s3.credentialsFile: missing: a file with ACCESS_KEY:SECRET on its first line")
	}
	for _, f := range []struct{ key, p string }{{"backup.s3.credentialsFile", s3.CredentialsFile}, {"backup.s3.caFile", s3.CAFile}} {
		d.checkPath(f.key, f.p)
		if strings.Contains(f.p, "{name}") {
			d.errorf(d.line(f.key), "%s: %s: {name} is not expanded here: one file for every agent", f.key, quote(f.p))
		}
	}
}

// checkEncryption checks backup.encryption as written: recipients that
// age parses, each once, and plaintext only when said, never beside
// recipients. A spec that takes snapshots and says neither is valid (a
// spec from before encryption: its agents keep taking plaintext
// snapshots, loudly), but warned about.
func (d *doc) checkEncryption(b Backup) {
	e := b.Encryption
	seen := map[string]bool{}
	for i, r := range e.Recipients {
		p := index("backup.encryption.recipients", i)
		if _, err := age.ParseX25519Recipient(r); err != nil {
			d.errorf(d.line(p), "%s: %s: not an age X25519 recipient (age1..., from age-keygen -y IDENTITY_FILE): %v", p, quote(r), err)
		} else if seen[r] {
			d.errorf(d.line(p), "%s: %s: listed twice", p, quote(r))
		}
		seen[r] = true
	}
	d.checkPath("backup.encryption.identityFile", e.IdentityFile)
	if strings.Contains(e.IdentityFile, "{name}") {
		d.errorf(d.line("backup.encryption.identityFile"), "backup.encryption.identityFile: %s: {name} is not expanded here: one path on every host that restores", quote(e.IdentityFile))
	}
	d.checkPath("backup.encryption.recipientsFile", e.RecipientsFile)
	if strings.Contains(e.RecipientsFile, "{name}") {
		d.errorf(d.line("backup.encryption.recipientsFile"), "backup.encryption.recipientsFile: %s: {name} is not expanded here: one path on every host", quote(e.RecipientsFile))
	}
	switch {
	case e.Plaintext && e.Encrypts():
		d.errorf(d.line("backup.encryption.plaintext"), "backup.encryption.plaintext: true beside recipients: snapshots are either encrypted to the recipients or plaintext; remove one")
	case e.Plaintext:
		d.warnf(d.line("backup.encryption.plaintext"), "backup.encryption.plaintext: true: every snapshot, locally and in S3, holds the whole keyspace (Kubernetes Secrets included) readable by whoever reads the file; give backup.encryption.recipients instead (docs/backups.md)")
	case !e.Encrypts() && (b.Interval.Duration != 0 || !d.given["backup.interval"] || b.S3 != (S3{})):
		d.warnf(d.line("backup.encryption", "backup"), "backup: NO ENCRYPTION: snapshots are taken in plaintext (the whole keyspace, Kubernetes Secrets included, readable by whoever reads a backup dir or the bucket): give backup.encryption.recipients (age-keygen; docs/backups.md), or say backup.encryption.plaintext: true to keep them plaintext on purpose")
	}
}

// warnf records a warning: the spec stays valid.
func (d *doc) warnf(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	d.warns = append(d.warns, Error{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// IdentityFileMode is what CheckIdentityFile refuses: an identity file
// its group or others can read or write.
const IdentityFileMode = 0o077

// ErrNoIdentity means the identity file is not on this host: the host
// takes, uploads and prunes encrypted snapshots and checks their
// integrity, but cannot restore them.
var ErrNoIdentity = errors.New("no identity file on this host")

// ReadIdentities reads the age identities of backup.encryption.
// identityFile. It refuses a file its group or others can read (or that
// is not a regular file), and never quotes the file's content. A file
// that does not exist is ErrNoIdentity (and fs.ErrNotExist).
func ReadIdentities(path string) ([]age.Identity, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: backup.encryption.identityFile is not set", ErrNoIdentity)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoIdentity, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("backup.encryption.identityFile %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("backup.encryption.identityFile %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("backup.encryption.identityFile %s: not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&IdentityFileMode != 0 {
		return nil, fmt.Errorf("backup.encryption.identityFile %s: mode %04o: its group or others can read it, and it is the key to every snapshot: refused (chmod 600 %s, owned by the agent's user)", path, perm, path)
	}
	ids, err := age.ParseIdentities(io.LimitReader(f, 1<<20))
	if err != nil {
		// age's error quotes no key material, only line numbers.
		return nil, fmt.Errorf("backup.encryption.identityFile %s: %w (one AGE-SECRET-KEY-1... a line, as age-keygen writes)", path, err)
	}
	return ids, nil
}

// checkIdentityFile reads the identity file when this host has one: a
// file others can read is an error; one whose keys read none of the
// recipients, a warning (new snapshots cannot be restored with it). A
// file that is not here is a host that only encrypts.
func (d *doc) checkIdentityFile(e Encryption, recipients []string) {
	if e.IdentityFile == "" {
		return
	}
	line := d.line("backup.encryption.identityFile")
	ids, err := ReadIdentities(e.IdentityFile)
	switch {
	case errors.Is(err, ErrNoIdentity) || errors.Is(err, fs.ErrPermission):
		return // not this host's to read: the agent says so where it runs
	case err != nil:
		d.errorf(line, "%v", err)
		return
	}
	if len(recipients) == 0 {
		return
	}
	for _, id := range ids {
		if x, ok := id.(*age.X25519Identity); ok && slices.Contains(recipients, x.Recipient().String()) {
			return
		}
	}
	d.warnf(line, "backup.encryption.identityFile %s: none of its keys is one of backup.encryption.recipients: snapshots taken now cannot be restored with it (add its recipient, age-keygen -y %s)", e.IdentityFile, e.IdentityFile)
}

// checkRecipientsFile reads the recipients file after defaults, the way
// the agent will (ReadRecipients), and returns every recipient the
// snapshots are encrypted to: the spec's and the file's. A file that is
// not here, or is refused, is a warning, not an error: an agent must not
// refuse to run etcd for a backup key; it takes no snapshot (never a
// plaintext one), and says so, until the file is put right.
func (d *doc) checkRecipientsFile(e Encryption) []string {
	if e.RecipientsFile == "" {
		return e.Recipients
	}
	r, err := ReadRecipients(e.RecipientsFile)
	if err != nil {
		d.warnf(d.line("backup.encryption.recipientsFile"), "%v: this host takes no snapshot until it is put right", err)
		return e.Recipients
	}
	return Recipients(e.Recipients, r)
}

// ReadRecipients reads backup.encryption.recipientsFile: age X25519
// recipients, one a line, blank lines and '#' comments skipped (age -R's
// format). Whoever can change the file chooses who can read every later
// snapshot, so it is read only when no user but root and the agent's can
// (safefile.ReadTrusted: the file, not a symlink, and every directory on
// its way). A file without a recipient is refused, never read as
// "plaintext".
func ReadRecipients(path string) ([]string, error) {
	fail := func(format string, args ...any) ([]string, error) {
		return nil, fmt.Errorf("backup.encryption.recipientsFile %s: "+format, append([]any{path}, args...)...)
	}
	b, err := safefile.ReadTrusted(path, 1<<20)
	switch {
	case errors.Is(err, safefile.ErrUntrusted):
		return fail("refused: %w: they could add a key and read every later snapshot", err)
	case err != nil:
		return fail("%w (every host that takes snapshots needs it: the age1... recipients, one a line)", err)
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := age.ParseX25519Recipient(line); err != nil {
			return fail("line %d: %q: not an age X25519 recipient (age1..., from age-keygen -y IDENTITY_FILE or etcdkeeper backup keygen): %v", i+1, line, err)
		}
		if slices.Contains(out, line) {
			return fail("line %d: %q: listed twice", i+1, line)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return fail("no recipient in it: snapshots are never taken in plaintext for want of one (add an age1... line, or say backup.encryption.plaintext: true instead of the file)")
	}
	return out, nil
}

// Recipients is the spec's recipients and then the file's, each once.
func Recipients(spec, file []string) []string {
	out := slices.Clone(spec)
	for _, r := range file {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// checkBackupFiles reads the S3 files after defaults, the way the agent
// will. No error quotes the credentials file: it holds a secret.
func (d *doc) checkBackupFiles(s3 S3) {
	if p := s3.CredentialsFile; p != "" {
		line := d.line("backup.s3.credentialsFile")
		if b, err := os.ReadFile(p); err != nil {
			d.errorf(line, "backup.s3.credentialsFile: %q: cannot read it: %s", p, reason(err))
		} else if _, _, err := ParseS3Credentials(b); err != nil {
			d.errorf(line, "backup.s3.credentialsFile: %q: %v", p, err)
		}
	}
	if p := s3.CAFile; p != "" {
		line := d.line("backup.s3.caFile")
		if b, err := os.ReadFile(p); err != nil {
			d.errorf(line, "backup.s3.caFile: %q: cannot read it: %s", p, reason(err))
		} else if !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
			d.errorf(line, "backup.s3.caFile: %q: no PEM certificate in it: it must hold the CA certificate(s)", p)
		}
	}
}

// ParseS3Credentials reads backup.s3.credentialsFile: either one line
// ACCESS_KEY:SECRET, or the lines aws_access_key_id = ... and
// aws_secret_access_key = ... of an ~/.aws/credentials file (the first of
// each; section headers and comments are skipped). Errors never quote the
// file.
func ParseS3Credentials(data []byte) (key, secret string, err error) {
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		switch name = strings.TrimSpace(name); {
		case ok && name == "aws_access_key_id" && key == "":
			key = strings.TrimSpace(value)
		case ok && name == "aws_secret_access_key" && secret == "":
			secret = strings.TrimSpace(value)
		case !ok && key == "" && secret == "":
			k, s, found := strings.Cut(line, ":")
			if !found || k == "" || s == "" {
				return "", "", errors.New("a line without '=' must be ACCESS_KEY:SECRET")
			}
			return k, s, nil
		}
	}
	if key == "" || secret == "" {
		return "", "", errors.New("no credentials: write ACCESS_KEY:SECRET on the first line, or aws_access_key_id = and aws_secret_access_key = lines")
	}
	return key, secret, nil
}
