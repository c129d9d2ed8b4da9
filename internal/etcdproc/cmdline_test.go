package etcdproc

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/cmdline")

// specDir is where the test specs live; the TLS case's temporary dir is
// shown as this in its golden file.
const specDir = "/etc/etcdkeeper"

// threeMembers is the spec of most cases; node2 has two peer URLs.
const threeMembers = `cluster: {name: demo}
members:
  - {name: node1, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}
  - {name: node2, peerURLs: [http://10.0.0.2:2380, http://node2.example:2380], clientURLs: [http://10.0.0.2:2379]}
  - {name: node3, peerURLs: [http://10.0.0.3:2380], clientURLs: [http://10.0.0.3:2379]}
`

// agentEnv is the agent's environment in every case: systemd's variables
// must not reach etcd, the rest must.
var agentEnv = []string{
	"PATH=/usr/bin:/bin",
	"NOTIFY_SOCKET=/run/systemd/notify",
	"WATCHDOG_USEC=30000000",
	"WATCHDOG_PID=1",
	"LISTEN_FDS=1",
	"GOMAXPROCS=2",
}

const agentBinary = "/usr/bin/etcdkeeper"

// joinMembers is the member list a joining node3 (id 0x3c, just added)
// starts with: a voter, a learner that runs, and another host's entry
// that was added but never started.
var joinMembers = []model.Member{
	{ID: 0x1a, Name: "node1", PeerURLs: []string{"http://10.0.0.1:2380"}, ClientURLs: []string{"http://10.0.0.1:2379"}},
	{ID: 0x2b, Name: "node2", PeerURLs: []string{"http://10.0.0.2:2380", "http://node2.example:2380"}, ClientURLs: []string{"http://10.0.0.2:2379"}, IsLearner: true},
	{ID: 0x7e, PeerURLs: []string{"http://10.0.0.7:2380"}},
	{ID: 0x3c, PeerURLs: []string{"http://10.0.0.3:2380"}, IsLearner: true},
}

// TestCommandLineGolden keeps the whole command line of each start mode in
// testdata/cmdline/<mode>.golden.
func TestCommandLineGolden(t *testing.T) {
	tests := []struct {
		golden string
		spec   func(t *testing.T) (*spec.Spec, string) // the spec and its dir
		member string
		b      func(*spec.Spec) Bootstrap
	}{
		{"new", specOf(threeMembers), "node1", NewCluster},
		{"as-is", specOf(threeMembers), "node1", func(*spec.Spec) Bootstrap { return AsIs() }},
		{"force-new-cluster", specOf(threeMembers), "node2", func(*spec.Spec) Bootstrap { return ForceNewCluster() }},
		{"join", specOf(threeMembers), "node3", func(*spec.Spec) Bootstrap { return Join(joinMembers, 0x3c, "node3") }},
		{"tls", tlsSpec, "node1", NewCluster},
		{"external-binary", specOf(threeMembers + "etcd: {binary: /usr/local/bin/etcd}\n"), "node2", NewCluster},
		{"etcd-flags", specOf(threeMembers + `etcd:
  flags:
    feature-gates: InitialCorruptCheck=true,CompactHashCheck=true,StopGRPCServiceOnDefrag=true
    --snapshot-count: "5000"
    quota-backend-bytes: "8589934592"
`), "node1", NewCluster},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			s, dir := tt.spec(t)
			m, ok := s.Lookup(tt.member)
			if !ok {
				t.Fatalf("no member %s in the spec", tt.member)
			}
			got := strings.ReplaceAll(render(CommandFor(s, m, tt.b(s), agentBinary, agentEnv)), dir, specDir)
			compareGolden(t, filepath.Join("testdata", "cmdline", tt.golden+".golden"), got)
		})
	}
}

// render is a command one line per path, argument and environment entry.
func render(c Command) string {
	var b strings.Builder
	b.WriteString("path " + c.Path + "\n")
	for _, a := range c.Args {
		b.WriteString("arg  " + a + "\n")
	}
	for _, e := range c.Env {
		b.WriteString("env  " + e + "\n")
	}
	return b.String()
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("command line differs from %s:\n%s\nwant:\n%s", path, got, want)
	}
}

// specOf parses text as the spec in specDir.
func specOf(text string) func(t *testing.T) (*spec.Spec, string) {
	return func(t *testing.T) (*spec.Spec, string) {
		t.Helper()
		return parse(t, text, specDir), specDir
	}
}

func parse(t *testing.T, text, dir string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(text), filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tlsSpec is threeMembers over https with client and peer certificates
// required, its pki written next to it in a temporary dir (the spec checks
// that the files exist and match).
func tlsSpec(t *testing.T) (*spec.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	ca := testpki.NewCA(t, "test CA")
	testpki.WriteFile(t, filepath.Join(pki, "ca.crt"), ca.CertPEM)
	for i, name := range []string{"node1", "node2", "node3"} {
		ip := net.IPv4(10, 0, 0, byte(i+1))
		ca.Issue(t, name, ip).Write(t, pki, name)
		cn := name
		if name == "node2" {
			cn = "node2.example" // its second peer URL's host
		}
		ca.Issue(t, cn, ip).Write(t, pki, name+"-peer")
	}
	ca.Issue(t, "root").Write(t, pki, "agent")
	text := strings.ReplaceAll(threeMembers, "http://", "https://") + `tls:
  client: {certFile: "pki/{name}.crt", keyFile: "pki/{name}.key", trustedCAFile: pki/ca.crt, clientCertAuth: true}
  peer: {certFile: "pki/{name}-peer.crt", keyFile: "pki/{name}-peer.key", trustedCAFile: pki/ca.crt, clientCertAuth: true}
  agent: {certFile: pki/agent.crt, keyFile: pki/agent.key, trustedCAFile: pki/ca.crt}
`
	return parse(t, text, dir), dir
}

// TestJoin: every current member, the new one under its own name, and a
// placeholder name for another host's unstarted entry.
func TestJoin(t *testing.T) {
	members := []model.Member{
		{ID: 1, Name: "node1", PeerURLs: []string{"http://127.0.0.1:2380"}},
		{ID: 7, Name: "", PeerURLs: []string{"http://127.0.0.7:2380"}},                   // another host's unstarted entry
		{ID: 9, Name: "", PeerURLs: []string{"http://127.0.0.2:2380", "http://h2:2380"}}, // ours, just added
	}
	b := Join(members, 9, "node2")
	want := "node1=http://127.0.0.1:2380,node2=http://127.0.0.2:2380,node2=http://h2:2380,unstarted-7=http://127.0.0.7:2380"
	if b.state != "existing" || b.initialCluster != want {
		t.Fatalf("Join = %s %s\nwant existing %s", b.state, b.initialCluster, want)
	}
}

// TestNewCluster: every peer URL of every member, in spec order.
func TestNewCluster(t *testing.T) {
	s := parse(t, `cluster: {name: c}
members:
  - {name: b, peerURLs: [http://10.0.0.2:2380, http://b:2380], clientURLs: [http://10.0.0.2:2379]}
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}
`, specDir)
	b := NewCluster(s)
	want := "b=http://10.0.0.2:2380,b=http://b:2380,a=http://10.0.0.1:2380"
	if b.state != "new" || b.initialCluster != want {
		t.Errorf("NewCluster = %s %s\nwant new %s", b.state, b.initialCluster, want)
	}
}

// TestAsIsRendersNewCluster: a member started as-is gets the flags it got
// before AsIs existed, those of a new cluster from the spec.
func TestAsIsRendersNewCluster(t *testing.T) {
	s := parse(t, threeMembers, specDir)
	m, _ := s.Lookup("node2")
	got, want := Flags(s, m, AsIs()), Flags(s, m, NewCluster(s))
	if !slices.Equal(got, want) {
		t.Errorf("as-is flags\n%q\nwant the new-cluster flags\n%q", got, want)
	}
}

func TestSettingsIgnoreBootstrapFlags(t *testing.T) {
	s := parse(t, `cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
`, specDir)
	a, _ := s.Lookup("a")
	before := Settings(s, a)
	if strings.Contains(before, "initial-cluster") {
		t.Fatalf("settings carry bootstrap flags: %s", before)
	}
	// Adding a member changes only --initial-cluster: no restart of a.
	s2 := parse(t, `cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
  - {name: c, peerURLs: [http://127.0.0.3:2380], clientURLs: [http://127.0.0.3:2379]}
etcd:
  flags: {}
`, specDir)
	a2, _ := s2.Lookup("a")
	if Settings(s2, a2) != before {
		t.Errorf("a scale-up changed member a's settings:\n%s\n%s", before, Settings(s2, a2))
	}
	// A changed etcd flag does.
	s2.Etcd.Flags = map[string]string{"snapshot-count": "5000"}
	if Settings(s2, a2) == before {
		t.Errorf("a changed etcd flag did not change the settings")
	}
}

// TestMemberFlagsOverride: a member's own flags win over etcd.flags, for
// that member only.
func TestMemberFlagsOverride(t *testing.T) {
	s, err := spec.Parse([]byte(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379], flags: {listen-metrics-urls: http://10.0.0.1:2381}}
  - {name: b, peerURLs: [http://10.0.0.2:2380], clientURLs: [http://10.0.0.2:2379]}
etcd: {flags: {listen-metrics-urls: http://127.0.0.1:2381}}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := Settings(s, s.Members[0]), Settings(s, s.Members[1])
	if !strings.Contains(a, "--listen-metrics-urls=http://10.0.0.1:2381") || strings.Contains(a, "127.0.0.1:2381") {
		t.Errorf("a's settings = %s", a)
	}
	if !strings.Contains(b, "--listen-metrics-urls=http://127.0.0.1:2381") {
		t.Errorf("b's settings = %s", b)
	}
}

// TestSettingsFollowCAFiles: etcd reads its trusted CA files only when it
// starts, so new contents there are a settings change (a rolling restart
// under the lock); its own certificate and key it reads again at each
// TLS handshake, so a renewal of those restarts nothing.
func TestSettingsFollowCAFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "etcd-ca")
	testpki.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.CertPEM)
	ca.Issue(t, "a", net.IPv4(127, 0, 0, 1)).Write(t, dir, "peer")
	path := filepath.Join(dir, "spec.yaml")
	testpki.WriteFile(t, path, []byte(`cluster: {name: c}
members: [{name: a, peerURLs: [https://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}]
tls:
  peer: {certFile: peer.crt, keyFile: peer.key, trustedCAFile: ca.crt, clientCertAuth: true}
`))
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	before := Settings(s, s.Members[0])
	ca.Issue(t, "a", net.IPv4(127, 0, 0, 1)).Write(t, dir, "peer")
	if got := Settings(s, s.Members[0]); got != before {
		t.Errorf("a renewed peer certificate changed the settings (etcd reloads it itself):\n%s\n%s", before, got)
	}
	// A CA bundle with the next CA added, as in a CA rotation.
	next := testpki.NewCA(t, "etcd-ca-2")
	testpki.WriteFile(t, filepath.Join(dir, "ca.crt"), append(append([]byte{}, ca.CertPEM...), next.CertPEM...))
	if got := Settings(s, s.Members[0]); got == before {
		t.Errorf("a changed CA file did not change the settings: %s", got)
	}
}
