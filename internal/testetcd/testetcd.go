// Package testetcd starts real etcd servers (the embedded server) for the
// tests of other packages.
package testetcd

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/testport"
)

// Start runs a real one-member etcd (the embedded server) on loopback
// and returns its client and peer URLs; it is closed when the test ends.
// It skips the test under -short: starting etcd is what makes a test slow.
func Start(t testing.TB) (client, peer string) {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with the server's configuration changed by mod (nil:
// none) before it starts, e.g. a slow compaction.
func StartWith(t testing.TB, mod func(*embed.Config)) (client, peer string) {
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
	if mod != nil {
		mod(cfg)
	}
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

// Node is one member of a cluster StartCluster starts.
type Node struct {
	Name string
	// Host is the IP it listens on: a loopback address (127.0.0.1,
	// 127.0.0.2, ...: Linux answers on all of 127/8), so that the members'
	// URLs name different hosts, as on real hosts; or, for members that
	// must not look like one machine to spec.SameHost, an address the test
	// added in a network namespace of its own.
	Host string
	// Dir is its data dir; "" for a fresh temporary one.
	Dir string
	// ClientURL and PeerURL are set by StartCluster.
	ClientURL, PeerURL string
}

// ClientTLS is what etcd's client port serves: TLS with this server
// certificate, and only to clients with a certificate from TrustedCAFile.
type ClientTLS struct {
	CertFile, KeyFile, TrustedCAFile string
}

// StartCluster runs a real etcd cluster (the embedded server) of nodes,
// each on a free port of its Host, and returns them with their URLs; it is
// closed when the test ends. Peers talk plain http; the client port serves
// TLS when tls is not nil (https client URLs). It skips the test under
// -short.
func StartCluster(t testing.TB, nodes []Node, tls *ClientTLS) []Node {
	t.Helper()
	return StartClusterWith(t, nodes, tls, nil)
}

// StartClusterWith is StartCluster with every member's configuration
// changed by mod (nil: none) before it starts, e.g. a small quota.
func StartClusterWith(t testing.TB, nodes []Node, tls *ClientTLS, mod func(*embed.Config)) []Node {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	nodes = append([]Node(nil), nodes...)
	var initial []string
	peers := make([]url.URL, len(nodes))
	clients := make([]url.URL, len(nodes))
	for i, n := range nodes {
		peers[i], clients[i] = FreeURLOn(t, n.Host), FreeURLOn(t, n.Host)
		if tls != nil {
			clients[i].Scheme = "https"
		}
		nodes[i].PeerURL, nodes[i].ClientURL = peers[i].String(), clients[i].String()
		initial = append(initial, n.Name+"="+peers[i].String())
	}
	var started []*embed.Etcd
	for i, n := range nodes {
		cfg := embed.NewConfig()
		cfg.Name = n.Name
		cfg.Dir = n.Dir
		if cfg.Dir == "" {
			cfg.Dir = t.TempDir()
		}
		cfg.Logger = "zap"
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peers[i]}, []url.URL{peers[i]}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clients[i]}, []url.URL{clients[i]}
		cfg.InitialCluster = strings.Join(initial, ",")
		if tls != nil {
			cfg.ClientTLSInfo = transport.TLSInfo{CertFile: tls.CertFile, KeyFile: tls.KeyFile, TrustedCAFile: tls.TrustedCAFile, ClientCertAuth: true}
		}
		if mod != nil {
			mod(cfg)
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		started = append(started, e)
	}
	deadline := time.After(30 * time.Second)
	for i, e := range started {
		select {
		case <-e.Server.ReadyNotify():
		case <-deadline:
			t.Fatalf("etcd %s did not become ready", nodes[i].Name)
		}
	}
	return nodes
}

// FreeURL is an http URL on a free loopback port.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	return FreeURLOn(t, "127.0.0.1")
}

// FreeURLOn is an http URL on a free port of host (an IP): one that no
// other FreeURLOn of this process, nor any other running test process,
// was given (testport): the probe's port is free once it closes, and
// StartCluster's next probe, or another package's, was once given it
// again before the etcd it was meant for bound it.
func FreeURLOn(t testing.TB, host string) url.URL {
	t.Helper()
	port, err := testport.Free(host)
	if err != nil {
		t.Fatal(err)
	}
	return url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port))}
}
