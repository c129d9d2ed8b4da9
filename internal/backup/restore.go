package backup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// RestoreCheck is the result of restoring a snapshot into a throwaway
// etcd and comparing what it serves with the snapshot's verification.
type RestoreCheck struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Seconds float64   `json:"seconds"`
	// What the restored etcd served: its revision and key count, and the
	// hash of its key bucket after it stopped.
	Revision int64  `json:"revision"`
	Keys     int64  `json:"keys"`
	KVHash   uint32 `json:"kvHash"`
	Error    string `json:"error,omitempty"`
}

// restoreTimeout bounds a restore check: restore, start, ask, stop.
const restoreTimeout = 10 * time.Minute

// CheckRestore restores the snapshot e with etcdutl's restore code into a
// throwaway data dir next to it, starts an embedded etcd on loopback from
// it, and compares what it serves with e's verification: the revision,
// the key count, and (unless a compaction was pending) the hash of the
// key bucket. The result is also written into e's sidecar.
func CheckRestore(ctx context.Context, e Entry) RestoreCheck {
	start := time.Now()
	rc := RestoreCheck{At: start.UTC()}
	err := checkRestore(ctx, e, &rc)
	rc.OK = err == nil
	if err != nil {
		rc.Error = err.Error()
	}
	rc.Seconds = time.Since(start).Seconds()
	if e.Sidecar != nil {
		sc := *e.Sidecar
		sc.RestoreCheck = &rc
		if werr := writeSidecar(filepath.Join(e.Dir, SidecarName(e.File)), &sc); werr != nil && rc.OK {
			rc.OK, rc.Error = false, werr.Error()
		}
	}
	return rc
}

func checkRestore(ctx context.Context, e Entry, rc *RestoreCheck) error {
	if !e.Verified() {
		return errors.New("the snapshot is not verified")
	}
	want := e.Sidecar.Verification
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	tmp, err := os.MkdirTemp(e.Dir, restorePrefix+"*")
	if err != nil {
		return fmt.Errorf("restore dir: %w", err)
	}
	defer removeRestoreDir(tmp)
	peer, client, err := loopbackURLs()
	if err != nil {
		return err
	}
	const name = "restore-check"
	dataDir := filepath.Join(tmp, "data")
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: e.Path(), Name: name, OutputDataDir: dataDir,
		PeerURLs: []string{peer.String()}, InitialCluster: name + "=" + peer.String(), InitialClusterToken: name,
	}); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := serveRestored(ctx, dataDir, name, peer, client, rc); err != nil {
		return err
	}
	rc.KVHash, _, err = kvHash(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return fmt.Errorf("restored db: %w", err)
	}
	var diffs []string
	if rc.Revision != want.Revision {
		diffs = append(diffs, fmt.Sprintf("revision %d, the snapshot's is %d", rc.Revision, want.Revision))
	}
	if rc.Keys != int64(want.TotalKey) {
		diffs = append(diffs, fmt.Sprintf("%d keys, the snapshot has %d", rc.Keys, want.TotalKey))
	}
	if !want.CompactPending && rc.KVHash != want.KVHash {
		diffs = append(diffs, fmt.Sprintf("key bucket hash %08x, the snapshot's is %08x", rc.KVHash, want.KVHash))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the restored etcd differs: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// serveRestored starts an embedded etcd on the restored data dir, asks it
// for its revision and key count, and stops it.
func serveRestored(ctx context.Context, dataDir, name string, peer, client url.URL, rc *RestoreCheck) error {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.InitialClusterToken = name
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start the restored etcd: %w", err)
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		return fmt.Errorf("the restored etcd: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("the restored etcd did not become ready: %w", ctx.Err())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("client for the restored etcd: %w", err)
	}
	defer cli.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := cli.Get(qctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count the restored keys: %w", err)
	}
	rc.Revision, rc.Keys = resp.Header.Revision, resp.Count
	return nil
}

// loopbackURLs are two free ports on 127.0.0.1 for the throwaway etcd.
func loopbackURLs() (peer, client url.URL, err error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var urls []url.URL
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		urls = append(urls, url.URL{Scheme: "http", Host: l.Addr().String()})
	}
	return urls[0], urls[1], nil
}

// removeRestoreDir removes the throwaway dir a restore check made: only
// ever a ".restore-check-" dir.
func removeRestoreDir(dir string) {
	if !strings.HasPrefix(filepath.Base(dir), restorePrefix) {
		return
	}
	_ = os.RemoveAll(dir)
}
