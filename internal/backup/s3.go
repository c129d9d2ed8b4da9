package backup

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// partSize is the size of each part of a multipart upload: S3 takes 5 MiB
// to 5 GiB; a snapshot larger than one part goes up in parts.
var partSize uint64 = 16 << 20

// uploadTimeout bounds one snapshot's upload.
const uploadTimeout = 30 * time.Minute

// Upload puts snapshot e and then its sidecar into the bucket of cfg
// (path-style, the CA of cfg.CAFile when set; multipart above partSize),
// records where in e's local sidecar, and returns that place.
func Upload(ctx context.Context, cfg spec.S3, e Entry) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	client, err := s3Client(cfg)
	if err != nil {
		return "", err
	}
	key := cfg.Prefix + e.File
	meta := map[string]string{}
	if sc := e.Sidecar; sc != nil {
		meta = map[string]string{"sha256": sc.SHA256, "revision": strconv.FormatInt(e.Revision, 10), "cluster": sc.Cluster, "member": sc.Member}
	}
	if _, err := client.FPutObject(ctx, cfg.Bucket, key, e.Path(), minio.PutObjectOptions{
		ContentType: "application/octet-stream", PartSize: partSize, UserMetadata: meta,
	}); err != nil {
		return "", fmt.Errorf("upload %s to bucket %s: %w", key, cfg.Bucket, err)
	}
	where := "s3://" + cfg.Bucket + "/" + key
	sidecar := filepath.Join(e.Dir, SidecarName(e.File))
	if e.Sidecar != nil {
		sc := *e.Sidecar
		sc.Uploaded = where
		if err := writeSidecar(sidecar, &sc); err != nil {
			return "", err
		}
	}
	if _, err := client.FPutObject(ctx, cfg.Bucket, SidecarName(key), sidecar, minio.PutObjectOptions{ContentType: "application/json"}); err != nil {
		return "", fmt.Errorf("upload %s to bucket %s: %w", SidecarName(key), cfg.Bucket, err)
	}
	return where, nil
}

// s3Client connects to cfg's endpoint path-style with the credentials of
// cfg.CredentialsFile.
func s3Client(cfg spec.S3) (*minio.Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("backup.s3.endpoint: %w", err)
	}
	b, err := os.ReadFile(cfg.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("backup.s3.credentialsFile: %w", err)
	}
	key, secret, err := spec.ParseS3Credentials(b)
	if err != nil {
		return nil, fmt.Errorf("backup.s3.credentialsFile %s: %w", cfg.CredentialsFile, err)
	}
	secure := u.Scheme == "https"
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("backup.s3.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("backup.s3.caFile %s: no PEM certificate in it", cfg.CAFile)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(key, secret, ""), Secure: secure, Region: cfg.Region,
		BucketLookup: minio.BucketLookupPath, Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	return client, nil
}

// remoteSnapshot is a snapshot object in the bucket.
type remoteSnapshot struct {
	Key  string
	File string
	parsed
}

// listRemote lists the snapshot objects of cluster under cfg's prefix,
// newest first (revision, then the time in the name).
func listRemote(ctx context.Context, client *minio.Client, cfg spec.S3, cluster string) ([]remoteSnapshot, error) {
	var out []remoteSnapshot
	for obj := range client.ListObjects(ctx, cfg.Bucket, minio.ListObjectsOptions{Prefix: cfg.Prefix + cluster + "-"}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list bucket %s: %w", cfg.Bucket, obj.Err)
		}
		file := strings.TrimPrefix(obj.Key, cfg.Prefix)
		if p, ok := parseName(cluster, file); ok {
			out = append(out, remoteSnapshot{Key: obj.Key, File: file, parsed: p})
		}
	}
	slices.SortFunc(out, func(a, b remoteSnapshot) int {
		return cmp.Or(cmp.Compare(b.Revision, a.Revision), b.Time.Compare(a.Time), strings.Compare(b.File, a.File))
	})
	return out, nil
}

// maxSidecarBytes bounds a sidecar read from the bucket.
const maxSidecarBytes = 1 << 20

// remoteSidecar reads the sidecar object of key.
func remoteSidecar(ctx context.Context, client *minio.Client, cfg spec.S3, key string) (*Sidecar, error) {
	obj, err := client.GetObject(ctx, cfg.Bucket, SidecarName(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", SidecarName(key), err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, maxSidecarBytes))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", SidecarName(key), err)
	}
	var sc Sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", SidecarName(key), err)
	}
	return &sc, nil
}

// open starts the download of the object (GET; its body arrives as it
// is read).
func (o *remoteObject) open(ctx context.Context) (*minio.Object, error) {
	obj, err := o.client.GetObject(ctx, o.cfg.Bucket, o.key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", o.key, err)
	}
	return obj, nil
}

// downloadTo writes what in downloads into a new file dst (0600, in the
// drill's 0700 scratch dir), hashing it on the way (streamSums; in a
// stage of its own, beside the write), and returns its sums. dst is
// removed again when the download fails.
func downloadTo(in io.Reader, dst string) (summed, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return summed{}, fmt.Errorf("download: %w", err)
	}
	sums := newStreamSums()
	pr, readDone := readStage(in, sums)
	_, err = copyChunks(f, pr)
	pr.CloseWithError(err)
	if rerr := readDone(); err == nil && rerr != nil {
		err = rerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
		return summed{}, fmt.Errorf("download: %w", err)
	}
	// A db that does not match etcd's trailer is refused, as Verify does.
	return sums.result()
}

// waitedReader keeps how long its reads waited: on a download, the time
// the bucket (and the network) kept the reader waiting.
type waitedReader struct {
	r      io.Reader
	waited time.Duration
}

func (w *waitedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := w.r.Read(p)
	w.waited += time.Since(start)
	return n, err
}
