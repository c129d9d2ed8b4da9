package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// secretWatch reads every file under its roots again and again while a
// schedule runs, and keeps each one it ever saw that held the secret:
// temporary files included, however short-lived (a read every few ms).
type secretWatch struct {
	secret []byte
	roots  []string

	mu    sync.Mutex
	files map[string]bool // every file seen -> held the secret
}

func (w *secretWatch) scan() {
	for _, root := range w.roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil // gone between the listing and the read
			}
			hit := bytes.Contains(b, w.secret)
			w.mu.Lock()
			w.files[p] = w.files[p] || hit
			w.mu.Unlock()
			return nil
		})
	}
}

func (w *secretWatch) hits() (seen int, hits []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, hit := range w.files {
		if hit {
			hits = append(hits, p)
		}
	}
	return len(w.files), hits
}

// TestNoPlaintextAnywhere writes a known secret into a real etcd, runs
// the schedule with encryption on (snapshots, uploads to a real S3
// server, restore checks with the identity, a restore drill from S3),
// and reads every byte of every file in the backup dir, the agent's state
// dir, the S3 server's storage (objects and its own temporary files) and
// the process's temp dir, every few milliseconds through the run; then
// every object through the S3 API: the secret is in none of them. The
// restore check's plaintext lives in memory only, and none is left.
func TestNoPlaintextAnywhere(t *testing.T) {
	var etcdDir string
	ep, peer := testetcd.StartWith(t, func(c *embed.Config) { etcdDir = c.Dir })
	fill(t, ep, 300, 200)
	secret := putSecret(t, ep)
	s3cfg, s3root := startS3Root(t)
	key := newKey(t)
	root := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // what the schedule would make in a temp dir goes here
	sp, err := spec.Parse(fmt.Appendf(nil, `cluster: {name: c1}
members:
  - {name: a, peerURLs: [%s], clientURLs: [%s]}
agent:
  stateDir: state/{name}
backup:
  interval: 2s
  keep: 2
  drillInterval: 5s
  encryption:
    recipients: [%s]
    identityFile: %s
  s3: {endpoint: %q, bucket: %q, prefix: %q, credentialsFile: %q, caFile: %q}
`, peer, ep, key.name, key.file, s3cfg.Endpoint, s3cfg.Bucket, s3cfg.Prefix, s3cfg.CredentialsFile, s3cfg.CAFile), filepath.Join(root, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	self := sp.Members[0]
	w := &secretWatch{secret: secret, roots: []string{root, s3root, tmp}, files: map[string]bool{}}

	m := metrics.New()
	s := NewScheduler(Config{Spec: func() (*spec.Spec, spec.Member) { return sp, self }, Metrics: m.Backup})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()

	var memSeen bool // a restore's scratch dir seen in memory
	deadline := time.Now().Add(3 * time.Minute)
	for {
		w.scan()
		if m, _ := filepath.Glob(filepath.Join(memDir, memPrefix+"*")); len(m) > 0 {
			memSeen = true
		}
		st := s.State()
		rc, d := st.LastRestoreCheck, st.LastDrill
		uploaded := 0
		if es, err := List(self.SnapshotDir, "c1"); err == nil {
			for _, e := range es {
				if e.Sidecar != nil && e.Sidecar.Uploaded != "" {
					uploaded++
				}
			}
		}
		if uploaded >= 2 && rc != nil && rc.OK && rc.Checked == CheckedRestore && d != nil && d.OK && strings.HasPrefix(d.Source, "s3://") {
			t.Logf("restore check: %.2fs; drill: %s", rc.Seconds, d.Line())
			break
		}
		if d != nil && !d.OK {
			t.Fatalf("drill failed: %s", d.Error)
		}
		if rc != nil && !rc.OK {
			t.Fatalf("restore check failed: %s", rc.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("in 3 min: %d snapshots uploaded, restore check %+v, drill %+v; last error %q", uploaded, rc, d, st.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	w.scan()

	// Every object in the bucket, read through the API.
	client, err := s3Client(s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	objects := 0
	for o := range client.ListObjects(context.Background(), s3cfg.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		r, err := client.GetObject(context.Background(), s3cfg.Bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		objects++
		if bytes.Contains(b, secret) {
			t.Errorf("s3://%s/%s holds the secret", s3cfg.Bucket, o.Key)
		}
	}
	seen, hits := w.hits()
	for _, h := range hits {
		t.Errorf("%s held the secret", h)
	}
	if left, _ := filepath.Glob(filepath.Join(memDir, memPrefix+"*")); len(left) > 0 {
		t.Errorf("the restore's plaintext left in memory: %v", left)
	}
	if !memSeen {
		t.Log("no restore's scratch dir seen in memory (each lasted less than a scan)")
	}
	if objects < 3 || seen < 8 {
		t.Fatalf("read %d objects and %d files: too few to say anything", objects, seen)
	}
	t.Logf("secret in %d of %d files seen during the run, and in none of %d objects unless said above", len(hits), seen, objects)

	// The watch finds a secret where there is one: the db etcd serves
	// from holds it, in a file the same scan reads.
	dbw := &secretWatch{secret: secret, roots: []string{etcdDir}, files: map[string]bool{}}
	dbw.scan()
	if _, hits := dbw.hits(); len(hits) == 0 {
		t.Errorf("the watch finds the secret nowhere in etcd's own data dir %s: it would miss a plaintext copy", etcdDir)
	}
}
