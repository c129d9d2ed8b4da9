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
//
// Who may have put it there (safety review 2026-12-03, G1): the agent
// probes and execs the new file as itself (root on a kubeadm host, with
// the etcd CA key). A candidate is refused, and never run, unless the file
// and every directory above it (and above the path it was started as, a
// symlink a release switch re-points) are owned by root or the agent's
// user and writable by no one else (a sticky directory protects the
// entries of trusted owners in it). The file is opened once: it is hashed,
// probed and exec'd through that descriptor (/proc/self/fd/N), so the file
// exec'd is the file checked, whatever lands at the path meanwhile.
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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// procSelf is the running image, readable even once its file is replaced.
const procSelf = "/proc/self/exe"

// Self is the executable this process runs.
type Self struct {
	// Path is where it was started from, as it was given (os.Args[0]
	// made absolute, or found on $PATH), symlinks not resolved: a release
	// switch that re-points a symlink is a new file at Path.
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
	// file is the candidate, opened once: hashed, probed and exec'd
	// through this descriptor (nil: none).
	file *os.File
}

// Running records the running executable: its path and the identity of
// the image in memory (not of the path: the file may already have been
// replaced between our exec and now, and then the first look sees it).
func Running(build model.Build) (*Self, error) {
	path, err := invokedPath()
	if err != nil {
		return nil, err
	}
	id, err := statID(procSelf)
	if err != nil {
		return nil, fmt.Errorf("stat own image %s: %w", procSelf, err)
	}
	return &Self{Path: path, Build: build, id: id}, nil
}

// invokedPath is the path this process was started as: os.Args[0], made
// absolute or looked up on $PATH as the shell did; os.Executable (every
// symlink resolved) when that names no file.
func invokedPath() (string, error) {
	arg := os.Args[0]
	var path string
	if strings.Contains(arg, "/") {
		path, _ = filepath.Abs(arg)
	} else if p, err := exec.LookPath(arg); err == nil {
		path, _ = filepath.Abs(p)
	}
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	path, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate own executable: %w", err)
	}
	// Replaced already: readlink says "<path> (deleted)".
	return strings.TrimSuffix(path, " (deleted)"), nil
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
	s.forget()
	l := &look{id: id, at: time.Now()}
	s.looked = l
	f, err := openTrusted(s.Path, id)
	if err != nil {
		l.err, l.final = err.Error(), true
		return nil, l.err
	}
	l.file = f
	same, err := sameBytes(procSelf, f)
	switch {
	case err != nil:
		l.err = err.Error()
	case same:
		// A reinstall of the same package: nothing to restart for.
	default:
		b, err := probeFile(ctx, f, s.Path)
		if err != nil {
			l.err = err.Error()
		} else {
			l.build = &b
		}
	}
	return l.build, l.err
}

// forget closes the last look's file.
func (s *Self) forget() {
	if s.looked != nil && s.looked.file != nil {
		_ = s.looked.file.Close()
		s.looked.file = nil
	}
}

// openTrusted opens the file at path for a probe and an exec, once it is
// sure nobody but root or this process's user could have put it there
// (see the package doc); id is its stat, which the opened file must have.
func openTrusted(path string, id fileID) (*os.File, error) {
	if err := Trusted(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if uint64(st.Dev) != id.dev || st.Ino != id.ino {
		_ = f.Close()
		return nil, fmt.Errorf("%s changed while it was checked: looking again", path)
	}
	if err := trustedOwner(path, st.Uid, os.FileMode(st.Mode&0o7777), false); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Trusted says why the executable at path is not to be run by the agent
// (nil: it may be): the file (and a symlink at path), and every directory
// above the path and above its target, must be owned by root or this
// process's user and writable by no one else, but for a sticky directory,
// where only an entry's owner (or the directory's) may replace it.
func Trusted(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("stat %s: %w", real, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: refused", real)
	}
	if err := trustedInfo(real, fi, false); err != nil {
		return err
	}
	if li, err := os.Lstat(path); err == nil && li.Mode()&os.ModeSymlink != 0 {
		if err := trustedInfo(path, li, false); err != nil {
			return err
		}
	}
	for _, p := range []string{path, real} {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return fmt.Errorf("resolve %s: %w", filepath.Dir(p), err)
		}
		for {
			di, err := os.Stat(dir)
			if err != nil {
				return fmt.Errorf("stat %s: %w", dir, err)
			}
			if err := trustedInfo(dir, di, true); err != nil {
				return fmt.Errorf("%w (above %s)", err, p)
			}
			if dir == "/" {
				break
			}
			dir = filepath.Dir(dir)
		}
	}
	return nil
}

func trustedInfo(path string, fi os.FileInfo, dir bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check: refused", path)
	}
	return trustedOwner(path, st.Uid, fi.Mode(), dir)
}

// trustedOwner is the rule for one entry: owned by root or this
// process's user; not writable by group or others, unless it is a sticky
// directory (anyone may add entries there, but only an entry's owner
// replace it; the entries on the way are checked in turn).
func trustedOwner(path string, uid uint32, mode os.FileMode, dir bool) error {
	if uid != 0 && int(uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by root or the agent's user (uid %d): not running a new binary from there (refused)", path, uid, os.Geteuid())
	}
	// A symlink's own mode is always 0777 and means nothing: who may
	// re-point it is its directory's business.
	if mode&os.ModeSymlink == 0 && mode.Perm()&0o022 != 0 && !(dir && mode&os.ModeSticky != 0) {
		return fmt.Errorf("%s is writable by group or others (mode %v): not running a new binary from there (refused): another local user could have put it there", path, mode)
	}
	return nil
}

func sameBytes(a string, b *os.File) (bool, error) {
	ha, err := fileSum(a)
	if err != nil {
		return false, err
	}
	if _, err := b.Seek(0, io.SeekStart); err != nil {
		return false, fmt.Errorf("read %s: %w", b.Name(), err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, b); err != nil {
		return false, fmt.Errorf("read %s: %w", b.Name(), err)
	}
	return bytes.Equal(ha, h.Sum(nil)), nil
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

// probeFile is Probe of the opened file f (named path in errors): the
// child runs it as its fd 3, so what answers is the file checked.
func probeFile(ctx context.Context, f *os.File, path string) (model.Build, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3", "version")
	cmd.ExtraFiles = []*os.File{f}
	return probeOutput(cmd, path)
}

// probeTimeout bounds `<new binary> version`.
const probeTimeout = 10 * time.Second

// Probe runs `path version` and reads the build it reports: the only
// source of the embedded etcd's version that the binary itself vouches
// for (its module list would not show a version set at link time).
func Probe(ctx context.Context, path string) (model.Build, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return probeOutput(exec.CommandContext(ctx, path, "version"), path)
}

func probeOutput(cmd *exec.Cmd, path string) (model.Build, error) {
	out, err := cmd.Output()
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
//
// What is exec'd is the file Installed checked and probed, through its
// open descriptor, not whatever is at Path by now.
func (s *Self) Exec() error {
	if s.looked == nil || s.looked.file == nil || s.looked.build == nil {
		return fmt.Errorf("exec %s: no checked new binary to run", s.Path)
	}
	fd := fmt.Sprintf("/proc/self/fd/%d", s.looked.file.Fd())
	if err := syscall.Exec(fd, os.Args, os.Environ()); err != nil {
		return fmt.Errorf("exec %s (%s): %w", s.Path, fd, err)
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
