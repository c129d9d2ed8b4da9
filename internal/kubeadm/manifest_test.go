package kubeadm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseManifestKubeadm(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cp3.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "cp3" {
		t.Errorf("Name() = %q, want cp3", m.Name())
	}
	if got, want := len(m.Flags), 20; got != want {
		t.Errorf("%d flags, want %d: %v", got, want, m.Flags)
	}
	if v, _ := m.Flag("initial-cluster"); v != "cp1=https://10.0.0.11:2380,cp3=https://10.0.0.13:2380,cp2=https://10.0.0.12:2380" {
		t.Errorf("initial-cluster = %q", v)
	}
	want := []Mount{{"/var/lib/etcd", "/var/lib/etcd"}, {"/etc/kubernetes/pki/etcd", "/etc/kubernetes/pki/etcd"}}
	if !reflect.DeepEqual(m.Mounts, want) {
		t.Errorf("Mounts = %v, want %v", m.Mounts, want)
	}
	if len(m.Env) != 0 {
		t.Errorf("Env = %v, want none", m.Env)
	}
}

func TestParseManifest(t *testing.T) {
	pod := func(container string) string {
		return "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n" + container
	}
	tests := []struct {
		name    string
		yaml    string
		flags   []Flag
		env     []string
		wantErr string
	}{
		{
			name:  "kubeadm's form: command with --flag=value",
			yaml:  pod("  - name: etcd\n    command: [etcd, --name=cp1, --data-dir=/var/lib/etcd]\n"),
			flags: []Flag{{"name", "cp1"}, {"data-dir", "/var/lib/etcd"}},
		},
		{
			name:  "flags in args, --flag value and a bare switch",
			yaml:  pod("  - name: etcd\n    command: [/usr/local/bin/etcd]\n    args: [--name, cp1, --client-cert-auth, -snapshot-count=5]\n"),
			flags: []Flag{{"name", "cp1"}, {"client-cert-auth", "true"}, {"snapshot-count", "5"}},
		},
		{
			name:  "args only: the image's entrypoint is etcd",
			yaml:  pod("  - name: etcd\n    args: [--name=cp1]\n"),
			flags: []Flag{{"name", "cp1"}},
		},
		{
			name:  "container found by its binary, ETCD_ variables noted",
			yaml:  pod("  - name: sidecar\n    command: [sleep, inf]\n  - name: db\n    command: [etcd, --name=cp1]\n    env: [{name: ETCD_QUOTA_BACKEND_BYTES, value: '1'}, {name: TZ, value: UTC}]\n"),
			flags: []Flag{{"name", "cp1"}},
			env:   []string{"ETCD_QUOTA_BACKEND_BYTES"},
		},
		{
			name:    "not a pod",
			yaml:    "apiVersion: apps/v1\nkind: Deployment\n",
			wantErr: `kind is "Deployment"`,
		},
		{
			name:    "not YAML",
			yaml:    "kind: [Pod\n",
			wantErr: "not a pod manifest",
		},
		{
			name:    "no etcd container",
			yaml:    pod("  - name: apiserver\n    command: [kube-apiserver]\n"),
			wantErr: "no etcd container",
		},
		{
			name:    "no --name",
			yaml:    pod("  - name: etcd\n    command: [etcd, --data-dir=/var/lib/etcd]\n"),
			wantErr: "no --name",
		},
		{
			name:    "a stray argument",
			yaml:    pod("  - name: etcd\n    command: [etcd, --name=cp1, --, x]\n"),
			wantErr: `argument "--" is not a flag`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Flags, tc.flags) {
				t.Errorf("Flags = %v, want %v", m.Flags, tc.flags)
			}
			if !reflect.DeepEqual(m.Env, tc.env) {
				t.Errorf("Env = %v, want %v", m.Env, tc.env)
			}
		})
	}
}

func TestFlagLastWins(t *testing.T) {
	m := Manifest{Flags: []Flag{{"snapshot-count", "1"}, {"snapshot-count", "2"}}}
	if v, ok := m.Flag("snapshot-count"); !ok || v != "2" {
		t.Errorf("Flag = %q, %v; want 2, true (etcd takes the last)", v, ok)
	}
	if _, ok := m.Flag("name"); ok {
		t.Error("Flag(name) found a flag that is not there")
	}
}

func TestHostPath(t *testing.T) {
	m := Manifest{Mounts: []Mount{
		{"/var/lib/etcd", "/mnt/disk"},
		{"/etc/kubernetes/pki", "/etc/kubernetes/pki"},
		{"/etc/kubernetes/pki/etcd", "/srv/etcd-pki"},
	}}
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/var/lib/etcd", "/mnt/disk", true},
		{"/var/lib/etcd/", "/mnt/disk", true},
		{"/var/lib/etcd-other", "/var/lib/etcd-other", false},
		{"/etc/kubernetes/pki/etcd/ca.crt", "/srv/etcd-pki/ca.crt", true}, // the deepest mount wins
		{"/etc/kubernetes/pki/apiserver.crt", "/etc/kubernetes/pki/apiserver.crt", true},
		{"/opt/certs/ca.crt", "/opt/certs/ca.crt", false},
	}
	for _, tc := range tests {
		got, ok := m.HostPath(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("HostPath(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestParseManifestsRefuses: a document or list item that is not an etcd
// pod fails the whole file, at its line: no host is silently left out.
func TestParseManifestsRefuses(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: etcd\n    command: [etcd, --name=cp1]\n"
	tests := []struct{ yaml, want string }{
		{pod + "---\napiVersion: apps/v1\nkind: Deployment\n", `m.yaml:8: kind is "Deployment"`},
		{"kind: List\nitems:\n- kind: Pod\n  spec: {containers: [{name: etcd, command: [etcd, --name=a]}]}\n- kind: Pod\n  spec: {containers: [{name: api, command: [kube-apiserver]}]}\n",
			"m.yaml:5: no etcd container"},
		{"kind: List\nitems: []\n", "m.yaml: the file is empty"},
	}
	for _, tc := range tests {
		if _, err := ParseManifests([]byte(tc.yaml), "m.yaml"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseManifests(%q) = %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := ParseManifest([]byte(pod + "---\n" + pod)); err == nil {
		t.Error("ParseManifest read one of two manifests")
	}
}
