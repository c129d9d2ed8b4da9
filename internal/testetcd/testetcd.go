// Package testetcd starts real etcd servers (the embedded server) for the
// tests of other packages.
package testetcd

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start runs a real one-member etcd (the embedded server) on loopback
// and returns its client and peer URLs; it is closed when the test ends.
// It skips the test under -short: starting etcd is what makes a test slow.
func Start(t testing.TB) (client, peer string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	p, c := FreeURL(t), FreeURL(t)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
	cfg.InitialCluster = cfg.Name + "=" + p.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not become ready")
	}
	return c.String(), p.String()
}

// FreeURL is an http URL on a free loopback port.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
