package packaging

import (
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// documentation is RFC 5737's TEST-NET-1, which no real host has.
var documentation = netip.MustParsePrefix("192.0.2.0/24")

type shippedSpec struct {
	Cluster struct {
		Name string `yaml:"name"`
	} `yaml:"cluster"`
	Members []struct {
		Name       string   `yaml:"name"`
		PeerURLs   []string `yaml:"peerURLs"`
		ClientURLs []string `yaml:"clientURLs"`
		AgentAddr  string   `yaml:"agentAddr"`
	} `yaml:"members"`
	Etcd struct {
		DataDir string `yaml:"dataDir"`
	} `yaml:"etcd"`
	Agent struct {
		Addr      string `yaml:"addr"`
		StateDir  string `yaml:"stateDir"`
		BackupDir string `yaml:"backupDir"`
	} `yaml:"agent"`
}

// TestShippedSpecIsInert: the spec installed as /etc/etcdkeeper/cluster.yaml
// is valid (TestDebInstalls runs `etcdkeeper validate` on it) but names only
// addresses from the documentation range, so an agent started on it by
// mistake can neither find its host in it nor bind its addresses.
func TestShippedSpecIsInert(t *testing.T) {
	var s shippedSpec
	if err := yaml.Unmarshal([]byte(readFile(t, packagingFile(t, "cluster.yaml"))), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Members) == 0 {
		t.Fatal("the shipped spec has no members; it is meant to be a valid example")
	}
	for _, m := range s.Members {
		for _, u := range append(append([]string{}, m.PeerURLs...), m.ClientURLs...) {
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatalf("member %s: %v", m.Name, err)
			}
			checkDocumentationHost(t, m.Name, pu.Hostname())
		}
		if m.AgentAddr != "" {
			host, _, err := net.SplitHostPort(m.AgentAddr)
			if err != nil {
				t.Fatalf("member %s agentAddr: %v", m.Name, err)
			}
			checkDocumentationHost(t, m.Name, host)
		}
	}
}

func checkDocumentationHost(t *testing.T, member, host string) {
	t.Helper()
	ip, err := netip.ParseAddr(host)
	if err != nil || !documentation.Contains(ip) {
		t.Errorf("member %s uses %q: the shipped example may only use %s (RFC 5737), so it stays inert", member, host, documentation)
	}
}

// TestShippedSpecPaths: the unit can write only /var/lib/etcd and
// /var/lib/etcdkeeper (each its own mount), and repair renames
// <dataDir>/member into the backup dir (default <dataDir>/.etcdkeeper-backups),
// so data dirs and backups must both be under /var/lib/etcd.
func TestShippedSpecPaths(t *testing.T) {
	var s shippedSpec
	if err := yaml.Unmarshal([]byte(readFile(t, packagingFile(t, "cluster.yaml"))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Etcd.DataDir != "/var/lib/etcd/{name}" {
		t.Errorf("etcd.dataDir %q, want /var/lib/etcd/{name} (StateDirectory=etcd)", s.Etcd.DataDir)
	}
	if s.Agent.StateDir != "/var/lib/etcdkeeper/{name}" {
		t.Errorf("agent.stateDir %q, want /var/lib/etcdkeeper/{name} (StateDirectory=etcdkeeper)", s.Agent.StateDir)
	}
	if s.Agent.BackupDir != "" && !strings.HasPrefix(s.Agent.BackupDir, "/var/lib/etcd/") {
		t.Errorf("agent.backupDir %q is outside /var/lib/etcd: a repair's rename would fail with EXDEV", s.Agent.BackupDir)
	}
}

// TestShippedSpecDocumentsEveryField: the shipped spec is the reference
// operators read on the host, so every field examples/cluster.yaml sets is
// there too, set or commented out.
func TestShippedSpecDocumentsEveryField(t *testing.T) {
	var ref yaml.Node
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(repoRoot(t), "examples", "cluster.yaml"))), &ref); err != nil {
		t.Fatal(err)
	}
	shipped := readFile(t, packagingFile(t, "cluster.yaml"))
	for _, key := range mappingKeys(&ref) {
		if !regexp.MustCompile(`(?m)^[\s#-]*` + regexp.QuoteMeta(key) + `:`).MatchString(shipped) {
			t.Errorf("examples/cluster.yaml has %q; packaging/cluster.yaml does not document it", key)
		}
	}
}

// mappingKeys lists every mapping key in a YAML tree, except those under
// etcd.flags (free-form etcd flags).
func mappingKeys(n *yaml.Node) []string {
	var keys []string
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			keys = append(keys, c.Value)
			if c.Value == "flags" {
				continue
			}
		}
		if n.Kind == yaml.MappingNode && i%2 == 1 && n.Content[i-1].Value == "flags" {
			continue
		}
		keys = append(keys, mappingKeys(c)...)
	}
	return keys
}

// TestScriptsNeverStart: installing or upgrading the package must not
// enable, start or restart the service, and nothing may delete data.
func TestScriptsNeverStart(t *testing.T) {
	starts := regexp.MustCompile(`(systemctl|deb-systemd-invoke|deb-systemd-helper|invoke-rc\.d|service)\s+(\S+\s+)*(enable|start|restart|try-restart|reload-or-restart|unmask)\b`)
	removesData := regexp.MustCompile(`rm\s[^\n]*/var/lib`)
	for _, name := range []string{"postinst", "prerm", "postrm"} {
		b, err := os.ReadFile(packagingFile(t, filepath.Join("scripts", name)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if starts.MatchString(code) {
				t.Errorf("scripts/%s:%d starts or enables the service: %s", name, i+1, strings.TrimSpace(line))
			}
			if removesData.MatchString(code) {
				t.Errorf("scripts/%s:%d removes data: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}
