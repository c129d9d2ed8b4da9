package spec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"time"
)

// Binary is what an etcd binary on disk is: its version (from
// `etcd --version`) and the sha256 of its file.
type Binary struct {
	Path    string
	Version Version
	SHA256  string
}

// ReadBinary hashes the file at path and asks it for its version.
func ReadBinary(path string) (Binary, error) {
	b := Binary{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return b, fmt.Errorf("etcd binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return b, fmt.Errorf("etcd binary %s: %w", path, err)
	}
	b.SHA256 = hex.EncodeToString(h.Sum(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return b, fmt.Errorf("etcd binary %s --version: %w", path, err)
	}
	if b.Version, err = ParseVersionOutput(string(out)); err != nil {
		return b, fmt.Errorf("etcd binary %s: %w", path, err)
	}
	return b, nil
}

// minRunnable is the oldest etcd the agent can start: the first with
// --feature-gates.
var minRunnable = Version{3, 6, 0}

// BuiltinVersion is the version of the etcd built into etcdkeeper.
func BuiltinVersion() Version {
	v, _ := ParseVersion(etcdVersion)
	return v
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkEtcdSHA256 checks etcd.sha256 as written.
func (d *doc) checkEtcdSHA256(e Etcd) {
	switch {
	case e.SHA256 == "":
	case e.Binary == "":
		d.errorf(d.line("etcd.sha256"), "etcd.sha256: set without etcd.binary: it checks an external etcd binary; drop it, or name the binary")
	case !hexSHA256.MatchString(e.SHA256):
		d.errorf(d.line("etcd.sha256"), "etcd.sha256: %s: want 64 lowercase hex digits (sha256sum's output)", quote(e.SHA256))
	}
}

// checkEtcdBinary checks the external etcd binary the spec names, as read
// by read (ReadBinary): it runs and says its version, its file has the
// spec's etcd.sha256, and the spec passes it no flag that its version
// removed (etcd refuses an unknown flag at start).
func (d *doc) checkEtcdBinary(s *Spec, read func(string) (Binary, error)) Errors {
	if s.Etcd.Binary == "" {
		return nil
	}
	line := d.line("etcd.binary")
	b, err := read(s.Etcd.Binary)
	switch {
	case err != nil:
		d.errorf(line, "etcd.binary: %v: install it on this host first, or fix the path", err)
	case s.Etcd.SHA256 != "" && b.SHA256 != s.Etcd.SHA256:
		d.errorf(d.line("etcd.sha256"), "etcd.sha256: %s has sha256 %s, the spec says %s: not the binary the spec means; install the right one or fix etcd.sha256", s.Etcd.Binary, b.SHA256, s.Etcd.SHA256)
	case b.Version.Less(minRunnable):
		// etcd refuses an unknown flag at start, and the agent's default
		// flags include --feature-gates (etcdproc's defaultFlags), which
		// 3.5 does not have: its etcd would exit at every start.
		d.errorf(line, "etcd.binary: %s is etcd %s: etcdkeeper runs etcd %s or later (it starts etcd with --feature-gates, which %s does not have): "+
			"upgrade the cluster with etcd's own procedure first (every member on %s or later, then %s), or name a %s or later binary",
			s.Etcd.Binary, b.Version, minRunnable.MinorString(), b.Version.MinorString(), minUpgradeTo36, minRunnable.MinorString(), minRunnable.MinorString())
		d.errs.sortByLine()
		return d.errs
	}
	if err == nil {
		d.checkRemovedFlags("etcd.flags", s.Etcd.Flags, b.Version)
		for i, m := range s.Members {
			d.checkRemovedFlags(memberPath(i)+".flags", m.Flags, b.Version)
		}
	}
	d.errs.sortByLine()
	return d.errs
}

func (d *doc) checkRemovedFlags(path string, flags map[string]string, v Version) {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if minor := RemovedFlag(name, v); minor != "" {
			p := join(path, name)
			d.errorf(d.line(p), "%s: etcd %s (etcd.binary) has no --%s: etcd %s removed it; drop it from the spec", p, v, name, minor)
		}
	}
}
