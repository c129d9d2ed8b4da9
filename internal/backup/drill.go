package backup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Drill is one restore drill: the newest snapshot restored offline as a
// disaster would need it, timed end to end. Seconds is the figure we
// publish (etcdkeeper_restore_drill_seconds): from asking the bucket (or
// the dir) for the newest snapshot to etcd's store read back from the
// restored data dir.
type Drill struct {
	At time.Time `json:"at"`
	OK bool      `json:"ok"`
	// Source is where the snapshot came from: s3://bucket/key, or its
	// path on this host.
	Source    string  `json:"source,omitempty"`
	File      string  `json:"file,omitempty"`
	Encrypted bool    `json:"encrypted"`
	Bytes     int64   `json:"bytes,omitempty"` // the plaintext's size
	Seconds   float64 `json:"seconds"`
	Steps     Timings `json:"steps"`
	Revision  int64   `json:"revision,omitempty"`
	Keys      int64   `json:"keys,omitempty"`
	Error     string  `json:"error,omitempty"`
	// RestoreCheck: the drill restored this host's own snapshot, and
	// this went into its sidecar as its restore check.
	RestoreCheck *RestoreCheck `json:"-"`
}

// MBPerSecond is the drill's rate over the plaintext.
func (d Drill) MBPerSecond() float64 {
	if d.Seconds <= 0 {
		return 0
	}
	return float64(d.Bytes) / 1e6 / d.Seconds
}

// Line is the drill in one line, for status.
func (d Drill) Line() string {
	at := d.At.UTC().Format("2006-01-02 15:04 UTC")
	if !d.OK {
		return fmt.Sprintf("FAILED at %s after %.1fs: %s", at, d.Seconds, d.Error)
	}
	enc := "plaintext"
	if d.Encrypted {
		enc = "encrypted"
	}
	return fmt.Sprintf("%.1fs at %s (%.0f MB %s from %s, %.0f MB/s: %s, verify %.1fs, restore %.1fs)",
		d.Seconds, at, float64(d.Bytes)/1e6, enc, d.Source, d.MBPerSecond(), d.Steps.fetchLine(), d.Steps.Verify, d.Steps.Restore)
}

// fetchLine says the download and decrypt steps; streamed, as one pass
// and its parts (Timings.Streamed).
func (t Timings) fetchLine() string {
	if t.Streamed {
		return fmt.Sprintf("download+decrypt %.1fs in one pass (waiting on the bucket %.1fs, decrypting %.1fs more)", t.Download+t.Decrypt, t.Download, t.Decrypt)
	}
	return fmt.Sprintf("download %.1fs, decrypt %.1fs", t.Download, t.Decrypt)
}

// DrillPlan is what a drill restores: from S3 when S3 is set (the copy a
// host that lost its disk would have), else from Dir.
type DrillPlan struct {
	Cluster string
	// ClusterID (hex) is the cluster whose snapshots count ("": any of
	// this name: a host that knows none, such as the CLI's).
	ClusterID string
	Dir       string
	S3        spec.S3
	Keys      Keys
}

// RunDrill restores the newest snapshot of p into a scratch dir in p.Dir
// (0700; removed after; an encrypted one's plaintext and restored data
// dir in memory, memScratch), as the restore check does, and times each
// step.
// A local snapshot that passes gets the result as its restore check.
func RunDrill(ctx context.Context, p DrillPlan) Drill {
	start := time.Now()
	d := Drill{At: start.UTC()}
	err := runDrill(ctx, p, &d)
	d.OK = err == nil
	if err != nil {
		d.Error = err.Error()
	}
	d.Seconds = time.Since(start).Seconds()
	return d
}

func runDrill(ctx context.Context, p DrillPlan, d *Drill) error {
	if err := CheckDir(p.Dir); err != nil {
		return fmt.Errorf("no drill: %w", err)
	}
	tmp, err := scratchDir(p.Dir, drillPrefix)
	if err != nil {
		return err
	}
	defer removeScratch(tmp, drillPrefix)
	step := time.Now()
	src, err := drillSnapshot(ctx, p, d)
	if err != nil {
		return err
	}
	sc := src.sidecar
	d.File, d.Encrypted = src.file, sc.Encryption != nil
	d.Bytes = sc.Size
	if sc.Encryption != nil {
		d.Bytes = sc.Encryption.PlainSize
	}
	if sc.Encryption != nil && !p.Keys.CanRead() {
		return fmt.Errorf("%s is encrypted and this host cannot read it: %w (run the drill where the identity file is)", d.File, cmpErr(p.Keys.NoIdentity, spec.ErrNoIdentity))
	}
	var rc RestoreCheck
	if src.remote != nil {
		err = drillRemote(ctx, src, p.Keys, tmp, step, &rc, &d.Steps)
	} else {
		d.Steps.Download = time.Since(step).Seconds()
		err = restoreFrom(ctx, src.local.Path(), sc, p.Keys, tmp, &rc, &d.Steps)
	}
	if err == nil && rc.Checked == CheckedDecrypt {
		// A drill is a restore: one that cannot restore has no time.
		err = fmt.Errorf("%s decrypted and compared, but %s", d.File, rc.Note)
	}
	d.Revision, d.Keys = rc.Revision, rc.Keys
	if local := src.local; local != nil && err == nil {
		// The drill of a local snapshot is its restore check.
		rc.At, rc.OK, rc.Seconds = d.At, true, time.Since(d.At).Seconds()
		c := *local.Sidecar
		c.RestoreCheck = &rc
		if writeSidecar(filepath.Join(local.Dir, SidecarName(local.File)), &c) == nil {
			d.RestoreCheck = &rc
		}
	}
	return err
}

// drillSource is the snapshot a drill restores: a local entry, or an
// object in the bucket with its sidecar.
type drillSource struct {
	file    string
	sidecar *Sidecar
	local   *Entry
	remote  *remoteObject
}

type remoteObject struct {
	client *minio.Client
	cfg    spec.S3
	key    string
}

// drillSnapshot finds the newest snapshot of p: in the bucket when p.S3
// is set (nothing is downloaded yet: drillRemote streams it), else in
// p.Dir.
func drillSnapshot(ctx context.Context, p DrillPlan, d *Drill) (drillSource, error) {
	if !p.S3.Enabled() {
		entries, err := List(p.Dir, p.Cluster)
		if err != nil {
			return drillSource{}, err
		}
		e, ok := NewestVerified(entries, p.ClusterID)
		if !ok && p.ClusterID == "" {
			e, ok = newestAnyCluster(entries)
		}
		if !ok {
			return drillSource{}, fmt.Errorf("no verified snapshot of cluster %s in %s to drill%s", p.Cluster, p.Dir, passedOver(entries))
		}
		d.Source = e.Path()
		return drillSource{file: e.File, sidecar: e.Sidecar, local: &e}, nil
	}
	client, err := s3Client(p.S3)
	if err != nil {
		return drillSource{}, err
	}
	remote, err := listRemote(ctx, client, p.S3, p.Cluster)
	if err != nil {
		return drillSource{}, err
	}
	var errs []error
	for _, r := range remote {
		sc, err := remoteSidecar(ctx, client, p.S3, r.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sc.File != r.File || !sc.Verified || (p.ClusterID != "" && sc.Source.ClusterID != p.ClusterID) {
			continue // another cluster's of this name, or not verified
		}
		d.Source = "s3://" + p.S3.Bucket + "/" + r.Key
		return drillSource{file: r.File, sidecar: sc, remote: &remoteObject{client: client, cfg: p.S3, key: r.Key}}, nil
	}
	return drillSource{}, errors.Join(fmt.Errorf("no verified snapshot of cluster %s in s3://%s/%s", p.Cluster, p.S3.Bucket, p.S3.Prefix), errors.Join(errs...))
}

// drillRemote restores the object src in one pass from the bucket: an
// encrypted one is decrypted as it downloads, into a scratch dir in
// memory (memScratch), its ciphertext hashed on the way; a plaintext one
// is written into tmp, hashed on the way. Either way no file is read
// back for its sums, and nothing is trusted before they are its
// sidecar's (restorePlain). The steps are timed from start (when the
// bucket was first asked) into tm.
func drillRemote(ctx context.Context, src drillSource, k Keys, tmp string, start time.Time, rc *RestoreCheck, tm *Timings) error {
	sc := src.sidecar
	scratch := tmp
	if sc.Encryption != nil {
		mem, err := memScratch(restoreRoom(sc.Encryption.PlainSize))
		if err != nil {
			// A drill is a restore: not downloaded when it cannot be one.
			return fmt.Errorf("%s not drilled: its plaintext is restored in memory only, and %w", src.file, err)
		}
		defer removeMem(mem)
		scratch = mem
	}
	obj, err := src.remote.open(ctx)
	if err != nil {
		return err
	}
	defer obj.Close()
	in := &waitedReader{r: obj}
	pass := time.Now()
	p := plainSnapshot{path: filepath.Join(scratch, src.file)}
	var sums summed
	if sc.Encryption != nil {
		p.path, p.decrypted = filepath.Join(scratch, plainName), true
		sums, err = decryptTo(in, p.path, sc, k.Identities)
	} else {
		sums, err = downloadTo(in, p.path)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", src.remote.key, err)
	}
	p.sums = &sums
	// Asking the bucket (listing, sidecars) and waiting on it is the
	// download; what decrypting added to the pass is the rest.
	tm.Download = pass.Sub(start).Seconds() + in.waited.Seconds()
	if sc.Encryption != nil {
		tm.Decrypt, tm.Streamed = time.Since(pass).Seconds()-in.waited.Seconds(), true
	} else {
		tm.Download = time.Since(start).Seconds()
	}
	return restorePlain(ctx, p, sc, scratch, rc, tm)
}

// passedOver says how many verified snapshots the choice passed over
// because their file is not what their sidecar describes ("" for none).
func passedOver(entries []Entry) string {
	n := 0
	for _, e := range entries {
		if e.Verified() && e.Distrust == "" && !Intact(e) {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d passed over: %v)", n, ErrChanged)
}

// newestAnyCluster is the newest verified intact entry of any cluster ID
// (the CLI knows none).
func newestAnyCluster(entries []Entry) (Entry, bool) {
	for _, e := range sorted(entries) {
		if e.Verified() && e.Distrust == "" && Intact(e) {
			return e, true
		}
	}
	return Entry{}, false
}

// drillDue: no drill yet in this run, or the last is interval old (or in
// the future: the clock moved); never when interval is 0.
func drillDue(now, last time.Time, interval time.Duration) bool {
	if interval <= 0 {
		return false
	}
	return last.IsZero() || last.After(now) || now.Sub(last) >= interval
}
