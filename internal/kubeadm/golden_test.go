package kubeadm

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// pkiDir is kubeadm's etcd PKI dir, as on every kubeadm host.
const pkiDir = "/etc/kubernetes/pki/etcd"

// goldenCases are the imports whose rendered spec is kept in
// testdata/golden/<name>.yaml.
var goldenCases = []struct {
	name, golden string
	manifests    []string
}{
	// The host that ran kubeadm init: its --initial-cluster names only itself.
	{"first host", "first-host", []string{"cp1.yaml"}},
	// The last host to join: it names all three, but only its own client URL.
	{"last host", "last-host", []string{"cp3.yaml"}},
	// Every host's manifest: nothing derived.
	{"all hosts", "all-hosts", []string{"cp1.yaml", "cp2.yaml", "cp3.yaml"}},
	// The same, given in another order: the same spec.
	{"all hosts, another order", "all-hosts", []string{"cp3.yaml", "cp1.yaml", "cp2.yaml"}},
	// kubeadm with etcd 3.6, extraArgs, extraEnvs and the data on its own disk.
	{"etcd 3.6, extraArgs", "etcd36-extraargs", []string{"cp1-etcd36-extraargs.yaml"}},
	// kubectl -n kube-system get pod -l component=etcd -o yaml: every host.
	{"kubectl List", "kubectl-list", []string{"kubectl-list.yaml"}},
	// Two manifests in one file, as YAML documents.
	{"two documents", "two-documents", []string{"two-documents.yaml"}},
	// cp3's data on its own disk: its own dataDir.
	{"data dir differs", "data-dir-differs", []string{"data-dir-differs.yaml"}},
	// A node name longer than a DNS label (Kubernetes allows 253).
	{"long node name", "long-node-name", []string{"cp1-long-node-name.yaml"}},
	// Metrics on each host's own address: each member's own flag.
	{"metrics on each host's address", "metrics-own-ip", []string{"metrics-own-ip.yaml"}},
}

func loadManifests(t *testing.T, files []string) []Manifest {
	t.Helper()
	var ms []Manifest
	for _, f := range files {
		p := filepath.Join("testdata", f)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// f: as copied from its host to the machine that runs the import
		got, err := ParseManifests(data, f)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ms = append(ms, got...)
	}
	return ms
}

func render(t *testing.T, d Document) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ToSpec(loadManifests(t, tc.manifests), KubeadmPKI(pkiDir))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, d, tc.golden)
		})
	}
}

// checkGolden compares d, rendered, with testdata/golden/<name>.yaml;
// go test -update rewrites the file.
func checkGolden(t *testing.T, d Document, name string) {
	t.Helper()
	got := render(t, d)
	golden := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered spec differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}
