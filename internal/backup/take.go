package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	if _, err := t.Client.SaveSnapshot(ctx, endpoint, tmp); err != nil {
		return fail(StageSnapshot, fmt.Errorf("from %s (%s): %w", src.Name, why, err))
	}
	hashedAt := sumNow()
	ver, sum, size, err := Verify(tmp)
	if err != nil {
		return fail(StageVerify, fmt.Errorf("snapshot from %s: %w", src.Name, err))
	}
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
		SHA256: sum, Size: size, Verified: true, Verification: ver,
		Seconds: time.Since(start).Seconds(),
	}
	if err := writeSidecar(filepath.Join(t.Dir, SidecarName(file)), sc); err != nil {
		return fail(StageSnapshot, err)
	}
	return Entry{Dir: t.Dir, File: file, Time: takenAt.UTC().Truncate(time.Second), Revision: ver.Revision, Size: size, Sidecar: sc}, nil
}

// removePartial removes a snapshot that was being written by this process
// and did not make it: only ever a ".partial-" name.
func removePartial(path string) {
	if !strings.HasPrefix(filepath.Base(path), partialPrefix) {
		return
	}
	_ = os.Remove(path)
}
