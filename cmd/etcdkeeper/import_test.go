package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// runImport runs import kubeadm on files and returns its error and stderr;
// it fails the test when the import does not return in time.
func runImport(t *testing.T, files []string, output string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- importKubeadm(&stdout, &stderr, importOptions{manifests: files, pkiDir: pkiTestDir, output: output})
	}()
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(20 * time.Second):
		t.Fatalf("import of %v did not return", files)
		return "", nil
	}
}

const pkiTestDir = "/etc/kubernetes/pki/etcd"

// TestImportHostileInput: import reads regular files of a sane size only,
// and says so plainly for an empty one.
func TestImportHostileInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := write("big.yaml", "# "+strings.Repeat("x", 5<<20)+"\n")
	tests := []struct{ path, want string }{
		{"/dev/zero", "/dev/zero: not a regular file"},
		{dir, dir + ": not a regular file"},
		{big, big + ": file too large: larger than"},
		{write("empty.yaml", ""), "empty.yaml: the file is empty"},
		{write("null.yaml", "null\n"), "null.yaml: the file is empty"},
		{write("comments.yaml", "# nothing\n---\n"), "comments.yaml: the file is empty"},
	}
	for _, tc := range tests {
		_, err := runImport(t, []string{tc.path}, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("import %s: err = %v, want it to contain %q", tc.path, err, tc.want)
		}
	}
}

// TestImportEveryDocument: a file with several manifests (YAML documents,
// or kubectl's kind: List) gives a member for each, never only the first.
func TestImportEveryDocument(t *testing.T) {
	td := filepath.Join("..", "..", "internal", "kubeadm", "testdata")
	tests := []struct {
		files []string
		want  string
	}{
		{[]string{"two-documents.yaml"}, "members cp1, cp2, from 2 manifest(s)"},
		{[]string{"kubectl-list.yaml"}, "members cp1, cp2, cp3, from 3 manifest(s)"},
	}
	for _, tc := range tests {
		var files []string
		for _, f := range tc.files {
			files = append(files, filepath.Join(td, f))
		}
		stderr, err := runImport(t, files, "")
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("import %v: err %v, stderr:\n%s\nwant %q", tc.files, err, stderr, tc.want)
		}
	}
}

// TestImportOutputOnlyValid: -o FILE is written only with a valid spec,
// and never replaces an existing file (agents act on a changed spec).
func TestImportOutputOnlyValid(t *testing.T) {
	dir := t.TempDir()
	cp1, err := os.ReadFile(filepath.Join("..", "..", "internal", "kubeadm", "testdata", "cp1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// TLS on the client port, but an http client URL: etcd would never
	// answer there.
	bad := filepath.Join(dir, "cp1-http.yaml")
	if err := os.WriteFile(bad, bytes.ReplaceAll(cp1, []byte("--advertise-client-urls=https://"), []byte("--advertise-client-urls=http://")), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "cluster.yaml")
	if _, err := runImport(t, []string{bad}, out); err == nil {
		t.Error("an invalid spec imported with exit 0")
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("-o %s written with an invalid spec", out)
	}
	good := filepath.Join(dir, "cp1.yaml")
	if err := os.WriteFile(good, cp1, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("existing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runImport(t, []string{good}, out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("import over an existing file: err = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "existing\n" {
		t.Errorf("existing -o file replaced:\n%s", b)
	}
}

// TestValidateCertificates: validate refuses a certificate that is not
// valid now and warns, with exit 0, about one that expires within 30 days.
func TestValidateCertificates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notAfter time.Duration
		code     int
		want     string
	}{
		{"expired", -24 * time.Hour, 1, "spec.yaml:6: tls.peer.certFile: "},
		{"expires in 10 days", 10 * 24 * time.Hour, 0, "spec.yaml:6: warning: tls.peer.certFile: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := testpki.NewCA(t, "etcd-ca")
			testpki.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.CertPEM)
			ca.IssueValid(t, "a", time.Now().Add(-400*24*time.Hour), time.Now().Add(tc.notAfter), net.IPv4(127, 0, 0, 1)).Write(t, dir, "peer")
			path := filepath.Join(dir, "spec.yaml")
			testpki.WriteFile(t, path, []byte(`cluster: {name: c}
members: [{name: a, peerURLs: [https://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}]
tls:
  peer:
    trustedCAFile: ca.crt
    certFile: peer.crt
    keyFile: peer.key
`))
			c := validateCmd()
			var stdout, stderr bytes.Buffer
			c.SetOut(&stdout)
			c.SetErr(&stderr)
			c.SetArgs([]string{"--config", path})
			err := c.Execute()
			code := 0
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("validate: exit %d (%v), stderr:\n%s\nwant exit %d and %q", code, err, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestImportAgentPKI: tls.agent comes from the manifest's own certificate
// directory unless --pki-dir names one; a relative --pki-dir is made
// absolute; each host's drop-in is printed with its --name.
func TestImportAgentPKI(t *testing.T) {
	manifest := filepath.Join("..", "..", "internal", "kubeadm", "testdata", "docker-desktop.yaml")
	for _, tc := range []struct{ pkiDir, want string }{
		{"", "certFile: /run/config/pki/etcd/healthcheck-client.crt"},
		{"etcd-pki", "certFile: " + filepath.Join(must(os.Getwd()), "etcd-pki", "healthcheck-client.crt")},
	} {
		var stdout, stderr bytes.Buffer
		_ = importKubeadm(&stdout, &stderr, importOptions{manifests: []string{manifest}, pkiDir: tc.pkiDir})
		if !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("--pki-dir %q: spec has no %q:\n%s\n%s", tc.pkiDir, tc.want, stdout.String(), stderr.String())
		}
		if !strings.Contains(stderr.String(), "ExecStart=/usr/bin/etcdkeeper run --config /etc/etcdkeeper/cluster.yaml --name docker-desktop") {
			t.Errorf("no drop-in for docker-desktop:\n%s", stderr.String())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestImportNextSteps: after the spec, the import prints the rest of the
// move: the host-by-host steps and kubeadm's etcd.external section with
// every member's client URL and the API server's etcd client certificate.
func TestImportNextSteps(t *testing.T) {
	dir := filepath.Join("..", "..", "internal", "kubeadm", "testdata")
	files := []string{filepath.Join(dir, "cp1.yaml"), filepath.Join(dir, "cp2.yaml"), filepath.Join(dir, "cp3.yaml")}
	stderr, err := runImport(t, files, filepath.Join(t.TempDir(), "cluster.yaml"))
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"next steps (docs/kubeadm.md):",
		"etcdctl move-leader",
		"mv /etc/kubernetes/manifests/etcd.yaml /etc/kubernetes/etcd.yaml.kubeadm",
		"systemctl enable --now etcdkeeper",
		"endpoints: [https://10.0.0.11:2379, https://10.0.0.12:2379, https://10.0.0.13:2379]",
		"caFile: /etc/kubernetes/pki/etcd/ca.crt",
		"certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt",
		"keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key",
		"'kubeadm join --control-plane'",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("import's stderr has no %q:\n%s", want, stderr)
		}
	}
	// Nothing is printed to follow when nothing was written.
	stderr, _ = runImport(t, []string{filepath.Join(dir, "force-new-cluster-on-one.yaml")}, "")
	if strings.Contains(stderr, "next steps") {
		t.Errorf("a failed import printed next steps:\n%s", stderr)
	}
}
