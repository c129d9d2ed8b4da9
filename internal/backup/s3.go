package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
