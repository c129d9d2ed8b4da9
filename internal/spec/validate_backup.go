package spec

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"regexp"
	"strings"
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
