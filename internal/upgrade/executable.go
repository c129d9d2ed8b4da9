// Package upgrade is how a running agent notices that its own executable
// was replaced on disk (a package upgrade) and restarts onto the new one.
//
// Why compare the file instead of a hook from the package's postinst: the
// agent is the one that must do the ordering (one host at a time, the
// leader last, under the cluster lock), and it can only do that when it
// learns of the new binary by itself, on every path that installs one:
// dpkg -i, apt-get upgrade, unattended-upgrades, a config-management copy,
// or a manual `install`. A postinst hook (systemctl reload) would cover
// only the first ones, and would say "look again" anyway: the file is the
// truth (the controller-runtime rule: a trigger only wakes the loop).
//
// How: dpkg (and install, cp --remove-destination, mv) replace the file by
// renaming a new one over it; Linux refuses to write into a running
// executable (ETXTBSY), so a new binary always is a new inode. At start
// the agent records the device and inode of the image it runs
// (/proc/self/exe, which stays readable after the file is gone) and the
// path it was started from; each pass stats the path. Another inode with
// other bytes (a reinstall of the same package is the same bytes) that
// answers `version` is a new build.
package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// procSelf is the running image, readable even once its file is replaced.
const procSelf = "/proc/self/exe"

// Self is the executable this process runs.
type Self struct {
	// Path is where it was started from (os.Executable at start).
	Path  string
	Build model.Build
	id    fileID
	// looked caches the last look at Path, by the file's identity.
	looked *look
}

type fileID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

type look struct {
	id    fileID
	build *model.Build
	err   string
	at    time.Time
	// final: exec'ing it failed; not tried again until the file changes.
	final bool
}

// Running records the running executable: its path and the identity of
// the image in memory (not of the path: the file may already have been
// replaced between our exec and now, and then the first look sees it).
func Running(build model.Build) (*Self, error) {
	path, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate own executable: %w", err)
	}
	// Replaced already: readlink says "<path> (deleted)".
	path = strings.TrimSuffix(path, " (deleted)")
	id, err := statID(procSelf)
	if err != nil {
		return nil, fmt.Errorf("stat own image %s: %w", procSelf, err)
	}
	return &Self{Path: path, Build: build, id: id}, nil
}

func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: time.Unix(st.Mtim.Unix())}, nil
}

// retryProbe is how long a file that did not answer `version` is left
// alone before it is tried again with the same identity (a copy being
// written changes size or mtime, and is tried at once).
const retryProbe = 10 * time.Second

// Installed looks at the file at Path now: nil and "" when it is the file
// this process runs (or a missing file: a package removal is no upgrade);
// the new file's build when it was replaced by another; an error text when
// the new file cannot be read or run yet.
func (s *Self) Installed(ctx context.Context) (*model.Build, string) {
	id, err := statID(s.Path)
	if err != nil || (id.dev == s.id.dev && id.ino == s.id.ino) {
		return nil, ""
	}
	if l := s.looked; l != nil && l.id == id && (l.err == "" || l.final || time.Since(l.at) < retryProbe) {
		return l.build, l.err
	}
	l := &look{id: id, at: time.Now()}
	s.looked = l
	same, err := sameBytes(procSelf, s.Path)
	switch {
	case err != nil:
		l.err = err.Error()
	case same:
		// A reinstall of the same package: nothing to restart for.
	default:
		b, err := Probe(ctx, s.Path)
		if err != nil {
			l.err = err.Error()
		} else {
			l.build = &b
		}
	}
	return l.build, l.err
}

func sameBytes(a, b string) (bool, error) {
	ha, err := fileSum(a)
	if err != nil {
		return false, err
	}
	hb, err := fileSum(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ha, hb), nil
}

func fileSum(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// probeTimeout bounds `<new binary> version`.
const probeTimeout = 10 * time.Second

// Probe runs `path version` and reads the build it reports: the only
// source of the embedded etcd's version that the binary itself vouches
// for (its module list would not show a version set at link time).
func Probe(ctx context.Context, path string) (model.Build, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return model.Build{}, fmt.Errorf("%s version: %w: %s", path, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return model.Build{}, fmt.Errorf("%s version: %w", path, err)
	}
	return ParseVersion(out)
}

// ParseVersion reads `etcdkeeper version`'s output:
//
//	etcdkeeper 0.5.0
//	etcd (embedded) 3.7.3
func ParseVersion(out []byte) (model.Build, error) {
	var b model.Build
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "etcdkeeper "); ok {
			b.Version = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "etcd (embedded) "); ok {
			b.EtcdVersion = strings.TrimSpace(v)
		}
	}
	if b.Version == "" || b.EtcdVersion == "" {
		return model.Build{}, fmt.Errorf("no etcdkeeper and embedded etcd version in %q", strings.TrimSpace(string(out)))
	}
	return b, nil
}

// Exec replaces this process with the executable at s.Path, with the same
// arguments and environment: the same PID, so systemd (Type=notify,
// NotifyAccess=main, WATCHDOG_PID) keeps supervising it as the same main
// process, with no RestartSec pause and nothing counted against the start
// limit; outside systemd, whatever started the agent still has it. Go
// opens every descriptor close-on-exec: the listeners and the client
// connections end with the old image. It returns only on failure.
func (s *Self) Exec() error {
	if err := syscall.Exec(s.Path, os.Args, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", s.Path, err)
	}
	return nil
}

// Failed marks the installed file as one the agent could not exec: it is
// no new build to restart onto until it changes (each try costs an etcd
// restart).
func (s *Self) Failed(err error) {
	if s.looked != nil {
		s.looked.build, s.looked.err, s.looked.final = nil, err.Error(), true
	}
}
