package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
)

// Taker takes one verified snapshot into Dir.
type Taker struct {
	// Client reaches the cluster (every member's client URLs) with the
	// agent's TLS and credentials; every call has a deadline.
	Client  *cluster.Client
	Cluster string
	// Member is the member whose agent (or host, for the CLI) takes it.
	Member string
	Dir    string
	By     string
	// Keys: when they have recipients, the snapshot is encrypted to them
	// (KeysFor); none: plaintext. Keys that KeysFor refused take nothing,
	// so that a caller that drops KeysFor's error still takes no
	// plaintext snapshot.
	Keys Keys
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Stage names where a snapshot attempt failed (metrics label).
type Stage string

// The stages of a snapshot's life that can fail.
const (
	StageSnapshot     Stage = "snapshot"
	StageVerify       Stage = "verify"
	StageUpload       Stage = "upload"
	StageRetention    Stage = "retention"
	StageRestoreCheck Stage = "restore-check"
)

// StageError is an error with the stage it happened in.
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string { return string(e.Stage) + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// StageOf is the stage err happened in (snapshot when it does not say).
func StageOf(err error) Stage {
	if se, ok := errors.AsType[*StageError](err); ok {
		return se.Stage
	}
	return StageSnapshot
}

func (t *Taker) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Take observes the cluster, chooses a source (ChooseSource), streams a
// snapshot from it into a temporary name, verifies it, renames it to its
// final name and writes its sidecar. A file that fails verification is
// not kept.
func (t *Taker) Take(ctx context.Context) (Entry, error) {
	start := time.Now()
	fail := func(stage Stage, err error) (Entry, error) { return Entry{}, &StageError{stage, err} }
	if t.Keys.Refused != nil {
		return fail(StageSnapshot, fmt.Errorf("no snapshot taken: %w", t.Keys.Refused))
	}
	v, err := t.Client.Observe(ctx)
	if err != nil {
		return fail(StageSnapshot, fmt.Errorf("observe the cluster: %w", err))
	}
	src, why, err := ChooseSource(v, t.Member)
	if err != nil {
		return fail(StageSnapshot, err)
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return fail(StageSnapshot, fmt.Errorf("backup dir: %w", err))
	}
	if err := CheckDir(t.Dir); err != nil {
		return fail(StageSnapshot, fmt.Errorf("no snapshot taken: %w", err))
	}
	takenAt := t.now()
	tmp := filepath.Join(t.Dir, partialName(t.Cluster, takenAt))
	defer removePartial(tmp) // a no-op once renamed
	endpoint := src.ClientURLs[0]
	hashedAt := sumNow()
	got, err := t.fetch(ctx, endpoint, tmp, src.DBSize)
	if err != nil {
		stage := StageSnapshot
		if got.verifyFailed {
			stage = StageVerify
		}
		return fail(stage, fmt.Errorf("snapshot from %s (%s): %w", src.Name, why, err))
	}
	ver, sum, size := got.ver, got.sum, got.size
	entries, err := List(t.Dir, t.Cluster)
	if err != nil {
		return fail(StageSnapshot, err)
	}
	file := FileName(t.Cluster, takenAt, ver.Revision)
	final := filepath.Join(t.Dir, file)
	if _, err := os.Lstat(final); !errors.Is(err, fs.ErrNotExist) {
		return fail(StageSnapshot, fmt.Errorf("%s exists already (a snapshot of the same revision in the same second)", file))
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(StageSnapshot, fmt.Errorf("rename snapshot: %w", err))
	}
	if err := atomicfile.SyncDir(t.Dir); err != nil {
		return fail(StageSnapshot, err)
	}
	noteSum(final, sum, hashedAt)
	clusterID := fmt.Sprintf("%x", v.ClusterID)
	role := "follower"
	if src.ID == v.LeaderID {
		role = "leader"
	}
	sc := &Sidecar{
		Writer: writer, By: t.By, Cluster: t.Cluster, Member: t.Member, File: file,
		Seq: nextSeq(entries, clusterID), TakenAt: takenAt.UTC(),
		Source: Source{Name: src.Name, ID: fmt.Sprintf("%x", src.ID), ClusterID: clusterID, Endpoint: endpoint, Role: role},
		SHA256: sum, Size: size, Verified: true, Verification: ver, Encryption: got.enc,
		Seconds: time.Since(start).Seconds(),
	}
	if err := writeSidecar(filepath.Join(t.Dir, SidecarName(file)), sc); err != nil {
		return fail(StageSnapshot, err)
	}
	return Entry{Dir: t.Dir, File: file, Time: takenAt.UTC().Truncate(time.Second), Revision: ver.Revision, Size: size, Sidecar: sc}, nil
}

// fetched is one snapshot in its temporary file: the file's sha256 and
// size, and, when it is encrypted, what the plaintext was.
type fetched struct {
	ver          Verification
	sum          string
	size         int64
	enc          *Encryption
	verifyFailed bool
}

// fetch streams a snapshot from endpoint into tmp and verifies it, its
// bytes hashed as they pass (streamSums: never read back for their sums).
// A plaintext one is written to tmp and verified there. An encrypted one
// goes into memory (memFile), never onto a filesystem, and is verified
// there; it is encrypted from there into tmp (encryptMem) by a goroutine
// that follows behind the stream and goes on beside the check: the
// stream never waits on the encryption, and the core the check leaves
// idle does the rest of it.
func (t *Taker) fetch(ctx context.Context, endpoint, tmp string, dbSize int64) (fetched, error) {
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fetched{}, fmt.Errorf("snapshot: %w", err)
	}
	defer out.Close()
	write := func(w io.Writer) (int64, error) { return t.Client.WriteSnapshot(ctx, endpoint, w) }
	if len(t.Keys.Recipients) == 0 {
		sums, err := writeSummed(write, out)
		if err == nil {
			err = syncClose(out)
		}
		if err != nil {
			return fetched{}, err
		}
		s, sumErr := sums.result()
		ver, sum, size, err := verifySummed(tmp, s, sumErr)
		return fetched{ver: ver, sum: sum, size: size, verifyFailed: err != nil}, err
	}
	if err := checkMemory(dbSize); err != nil {
		return fetched{}, err
	}
	mem, memPath, err := memFile("etcdkeeper-snapshot")
	if err != nil {
		return fetched{}, err
	}
	defer mem.Close()
	tail := newMemTail(mem)
	stop := make(chan struct{})
	encrypted := make(chan encryptedFile, 1)
	go func() { encrypted <- encryptMem(tail, 2*dbSize+64<<20, out, t.Keys.Recipients, stop) }()
	sums, err := writeSummed(write, tail)
	tail.end(err)
	if err != nil {
		<-encrypted
		return fetched{}, err
	}
	s, sumErr := sums.result()
	ver, plainSum, plainSize, err := verifySummed(memPath, s, sumErr)
	if err != nil {
		close(stop)
		<-encrypted
		return fetched{ver: ver, verifyFailed: true}, err
	}
	e := <-encrypted
	if e.err == nil {
		e.err = syncClose(out)
	}
	if e.err != nil {
		return fetched{}, e.err
	}
	enc := &Encryption{Format: FormatAge, Recipients: slices.Clone(t.Keys.Names), PlainSHA256: plainSum, PlainSize: plainSize}
	return fetched{ver: ver, sum: e.sum, size: e.size, enc: enc}, nil
}

// writeSummed streams write's snapshot into out, hashing it in a stage
// of its own beside the write.
func writeSummed(write func(io.Writer) (int64, error), out io.Writer) (*streamSums, error) {
	sums := newStreamSums()
	hash := startStage(func(r io.Reader) error {
		_, err := copyChunks(sums, r)
		return err
	})
	// etcd's stream comes in pieces of 32 KiB or so: written on in chunks.
	in := bufio.NewWriterSize(io.MultiWriter(out, hash), chunk)
	_, err := write(in)
	if err == nil {
		err = in.Flush()
	}
	if err = hash.finish(err); err != nil {
		return nil, err
	}
	return sums, nil
}

func syncClose(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// removePartial removes a snapshot that was being written by this process
// and did not make it: only ever a ".partial-" name.
func removePartial(path string) {
	if !strings.HasPrefix(filepath.Base(path), partialPrefix) {
		return
	}
	_ = os.Remove(path)
}
