package backup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// startS3 runs a real S3-compatible server, versitygw with its posix
// backend (pinned in tools/s3server/go.mod, built from the Go module
// proxy), over TLS with a certificate of its own CA, and returns the
// S3 settings that reach it. It skips when the server cannot be built.
func startS3(t *testing.T) spec.S3 {
	t.Helper()
	cfg, _ := startS3Root(t)
	return cfg
}

// startS3Root is startS3 that also returns the server's root dir: every
// object, and every file the server writes on the way, lies under it.
func startS3Root(t *testing.T) (spec.S3, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts an S3 server")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "versitygw")
	build := exec.Command("go", "build", "-modfile=tools/s3server/go.mod", "-o", bin, "github.com/versity/versitygw/cmd/versitygw")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("no S3 server: building versitygw failed: %v\n%s", err, out)
	}
	ca := testpki.NewCA(t, "s3-ca")
	cert, key := ca.Issue(t, "localhost", net.ParseIP("127.0.0.1")).Write(t, dir, "s3")
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, ca.CertPEM)
	creds := filepath.Join(dir, "s3.credentials")
	testpki.WriteFile(t, creds, []byte("test-access:test-secret-key\n"))
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	addr := testetcd.FreeURL(t).Host
	srv := exec.Command(bin, "--access", "test-access", "--secret", "test-secret-key", "--port", addr,
		"--cert", cert, "--key", key, "--quiet", "posix", root)
	var log strings.Builder
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s:\n%s", addr, log.String())
		}
	}
	cfg := spec.S3{Endpoint: "https://" + addr, Bucket: "etcd-backups", Prefix: "prod/", CredentialsFile: creds, CAFile: caFile}
	client, err := s3Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(context.Background(), cfg.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket: %v\n%s", err, log.String())
	}
	return cfg, root
}

// TestUploadToS3: a snapshot larger than a part goes up in parts,
// path-style, over TLS with a custom CA, followed by its sidecar; what
// comes back has the same sha256. Without the CA, the upload is refused.
func TestUploadToS3(t *testing.T) {
	cfg := startS3(t)
	defer func(p uint64) { partSize = p }(partSize)
	partSize = 5 << 20 // S3's smallest part: 12 MiB go up in 3 parts

	dir := t.TempDir()
	body := make([]byte, 12<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	e := entry(1, 42, BySchedule, "a", true)
	e.Dir, e.Size = dir, int64(len(body))
	sum := sha256.Sum256(body)
	e.Sidecar.SHA256 = hex.EncodeToString(sum[:])
	if err := os.WriteFile(e.Path(), body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeSidecar(filepath.Join(dir, SidecarName(e.File)), e.Sidecar); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	where, err := Upload(ctx, cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://etcd-backups/prod/" + e.File; where != want {
		t.Errorf("Upload = %q, want %q", where, want)
	}
	client, err := s3Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := client.StatObject(ctx, cfg.Bucket, "prod/"+e.File, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != e.Size || !strings.HasSuffix(info.ETag, "-3") {
		t.Errorf("object: %d bytes, ETag %q; want %d bytes uploaded in 3 parts (ETag ...-3)", info.Size, info.ETag, e.Size)
	}
	if got := info.UserMetadata["Sha256"]; got != e.Sidecar.SHA256 {
		t.Errorf("object metadata sha256 = %q, want %q (all: %v)", got, e.Sidecar.SHA256, info.UserMetadata)
	}
	obj, err := client.GetObject(ctx, cfg.Bucket, "prod/"+e.File, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, obj); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.Sidecar.SHA256 {
		t.Errorf("downloaded sha256 %s, want %s", got, e.Sidecar.SHA256)
	}
	if _, err := client.StatObject(ctx, cfg.Bucket, "prod/"+SidecarName(e.File), minio.StatObjectOptions{}); err != nil {
		t.Errorf("sidecar not uploaded: %v", err)
	}
	if sc, err := readSidecar(filepath.Join(dir, SidecarName(e.File))); err != nil || sc.Uploaded != where {
		t.Errorf("local sidecar: %+v, %v; want uploaded %s", sc, err, where)
	}

	noCA := cfg
	noCA.CAFile = ""
	if _, err := Upload(ctx, noCA, e); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Upload without the CA = %v, want a certificate error", err)
	}
}
