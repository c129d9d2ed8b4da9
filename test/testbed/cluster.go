package testbed

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/testport"
)

// Member is one "host" of a test cluster: its own loopback address, or on
// the network test bed (NewOnNet) its own network namespace and address.
type Member struct {
	Name string
	IP   string
	// Host is the member's network namespace on the network test bed;
	// its NS is "" on loopback.
	Host       Host
	PeerPort   int
	ClientPort int
	AgentPort  int
	// Scheme of the member's URLs: "https" once the cluster uses TLS,
	// "" for http.
	Scheme string
}

func (m Member) PeerURL() string   { return fmt.Sprintf("%s://%s:%d", m.scheme(), m.IP, m.PeerPort) }
func (m Member) ClientURL() string { return fmt.Sprintf("%s://%s:%d", m.scheme(), m.IP, m.ClientPort) }

func (m Member) scheme() string {
	if m.Scheme == "" {
		return "http"
	}
	return m.Scheme
}

// Cluster is a test cluster: a spec file, a data root and the agents.
type Cluster struct {
	t       TB
	Dir     string
	Spec    string
	Members []Member
	agents  map[string]*Process
	Extra   string // extra YAML appended to the spec
	// EtcdFlags are YAML lines added under etcd.flags (indented four
	// spaces), e.g. "    quota-backend-bytes: \"16777216\"\n".
	EtcdFlags string
	// AgentExtra is YAML added under agent: (indented two spaces).
	AgentExtra string
	tls        *tls.Config
	// net is the bridge of the network test bed, nil on loopback.
	net *Network
	// PerHostSpec: each agent reads its own copy of the spec,
	// SpecPath(name), as on real hosts; WriteSpec writes them all, and
	// WriteHostSpec one.
	PerHostSpec bool
}

// hostCounter gives each test cluster fresh loopback addresses, so that a
// slow-to-close socket of one test never bites the next.
var hostCounter atomic.Int64

func init() { hostCounter.Store(10) }

func New(t TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Dir: t.TempDir(), agents: map[string]*Process{}}
	c.Spec = filepath.Join(c.Dir, "cluster.yaml")
	for i := 0; i < n; i++ {
		c.AddMember()
	}
	c.WriteSpec()
	t.Cleanup(c.cleanup)
	return c
}

// NewOnNet is New on the network test bed: each member in its own network
// namespace on the program's bridge (net.go). It runs only inside
// Isolate's namespaces.
func NewOnNet(t TB, n int) *Cluster {
	t.Helper()
	nw, err := Net()
	if err != nil {
		t.Fatalf("network test bed: %v", err)
	}
	c := &Cluster{t: t, Dir: t.TempDir(), agents: map[string]*Process{}, net: nw}
	c.Spec = filepath.Join(c.Dir, "cluster.yaml")
	t.Cleanup(c.cleanup) // registered first, so it runs after the agents stopped
	for i := 0; i < n; i++ {
		c.AddMember()
	}
	c.WriteSpec()
	return c
}

// OnNet reports whether the cluster runs on the network test bed.
func (c *Cluster) OnNet() bool { return c.net != nil }

// AddMember adds a Member to the test cluster (not yet to the spec file).
func (c *Cluster) AddMember() Member {
	var m Member
	if c.net != nil {
		h, err := c.net.AddHost()
		if err != nil {
			c.t.Fatalf("network test bed: %v", err)
		}
		// A host of its own: etcd's and the agent's default ports.
		m = Member{Name: fmt.Sprintf("node%d", len(c.Members)+1), IP: h.IP, Host: h,
			PeerPort: 2380, ClientPort: 2379, AgentPort: 2378}
	} else {
		n := hostCounter.Add(1)
		ip := fmt.Sprintf("127.0.%d.%d", n/250, n%250+1)
		m = Member{Name: fmt.Sprintf("node%d", len(c.Members)+1), IP: ip,
			PeerPort: FreePort(c.t, ip), ClientPort: FreePort(c.t, ip), AgentPort: FreePort(c.t, ip)}
	}
	if c.tls != nil {
		m.Scheme = "https"
	}
	c.Members = append(c.Members, m)
	return m
}

// UseTLS switches the members' URLs to https and makes the test clients
// connect with cfg. The spec's tls: section goes in Extra; call WriteSpec
// after both.
func (c *Cluster) UseTLS(cfg *tls.Config) {
	c.tls = cfg
	for i := range c.Members {
		c.Members[i].Scheme = "https"
	}
}

// FreePort returns a port on ip that nothing listens on and that no
// earlier FreePort call in this test process, nor any other running test
// process, got (testport.Free). A port is free once its probe listener
// closes, so the kernel may hand it out again to the very next probe: a
// member's client URL and agent address once got the same port (the
// spec, rightly, refused to start).
func FreePort(t TB, ip string) int {
	t.Helper()
	port, err := testport.Free(ip)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return port
}

// WriteSpec writes the spec listing members (all by default), atomically,
// to c.Spec and, with PerHostSpec, to every host's copy.
func (c *Cluster) WriteSpec(names ...string) {
	c.t.Helper()
	text := c.SpecText(names...)
	c.writeFile(c.Spec, text)
	if c.PerHostSpec {
		for _, m := range c.Members {
			c.WriteHostSpec(m.Name, text)
		}
	}
}

// SpecPath is the spec file the agent of member name reads: c.Spec, or
// with PerHostSpec the host's own copy.
func (c *Cluster) SpecPath(name string) string {
	if c.PerHostSpec {
		return filepath.Join(c.Dir, name, "etc", "cluster.yaml")
	}
	return c.Spec
}

// WriteHostSpec writes text (SpecText) to the spec file of host name
// only, atomically: a spec edit reaching that host.
func (c *Cluster) WriteHostSpec(name, text string) {
	c.t.Helper()
	path := c.SpecPath(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatalf("%v", err)
	}
	c.writeFile(path, text)
}

func (c *Cluster) writeFile(path, text string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		c.t.Fatalf("%v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		c.t.Fatalf("%v", err)
	}
}

// SpecText is the spec listing members (all by default).
func (c *Cluster) SpecText(names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:\n  name: itest\nmembers:\n")
	for _, m := range c.Members {
		if len(names) > 0 && !slices.Contains(names, m.Name) {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n    peerURLs: [%q]\n    clientURLs: [%q]\n    agentAddr: %s:%d\n",
			m.Name, m.PeerURL(), m.ClientURL(), m.IP, m.AgentPort)
	}
	fmt.Fprintf(&b, "etcd:\n  dataDir: %s/{name}/etcd\n  flags:\n    log-level: warn\n%s", c.Dir, c.EtcdFlags)
	fmt.Fprintf(&b, "agent:\n  stateDir: %s/{name}/state\n  interval: 500ms\n  stopTimeout: 10s\n%s", c.Dir, c.AgentExtra)
	if !strings.Contains(c.Extra, "backup:") {
		// Scheduled snapshots (and their restore checks, each an etcd of
		// its own) are tested where they are the subject, not on every
		// agent start of every test.
		b.WriteString("backup:\n  interval: 0s\n")
	}
	b.WriteString(c.Extra)
	return b.String()
}

func (c *Cluster) Member(name string) Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	c.t.Fatalf("no Member %s", name)
	return Member{}
}

func (c *Cluster) DataDir(name string) string  { return filepath.Join(c.Dir, name, "etcd") }
func (c *Cluster) StateDir(name string) string { return filepath.Join(c.Dir, name, "state") }

// Client connects to the given members (all by default).
func (c *Cluster) Client(names ...string) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range c.Members {
		if len(names) == 0 || slices.Contains(names, m.Name) {
			eps = append(eps, m.ClientURL())
		}
	}
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, TLS: c.tls, Logger: zap.NewNop()}
	if c.net != nil {
		// A member cut off the network neither answers nor resets its
		// connections: keepalives find the dead ones.
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = time.Second, time.Second
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

func Names(ms ...Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func (c *Cluster) AllNames() []string { return Names(c.Members...) }

func Put(t TB, cli *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

// GetFrom reads key serializably from one member's own endpoint: proof
// that the Member itself holds the data.
func (c *Cluster) GetFrom(name, key string) (string, error) {
	cli := c.Client(name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("key %s not found on %s", key, name)
	}
	return string(resp.Kvs[0].Value), nil
}

// Journal reads the rejoin journal file of a member's agent.
func (c *Cluster) Journal(name string) map[string]any {
	b, err := os.ReadFile(filepath.Join(c.StateDir(name), "rejoin.json"))
	if err != nil {
		return nil
	}
	var j map[string]any
	_ = json.Unmarshal(b, &j)
	return j
}

// Backups lists the moved-aside data dirs of a member.
func (c *Cluster) Backups(name string) []string {
	dir := filepath.Join(c.DataDir(name), ".etcdkeeper-backups")
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}
