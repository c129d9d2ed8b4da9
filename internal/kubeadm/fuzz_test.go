package kubeadm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// FuzzImport: a manifest never panics the import, and what the import
// renders from it is read back by spec.Parse without a panic. Seeds: every
// manifest in testdata.
func FuzzImport(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("null\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		d, err := ToSpec([]Manifest{m}, KubeadmPKI(pkiDir))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Render(&b, d); err != nil {
			t.Fatalf("render: %v", err)
		}
		_, _ = spec.Parse(b.Bytes(), "fuzz.yaml")
	})
}
