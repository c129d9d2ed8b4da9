package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestRenewSpec: tls.ca and tls.renew are checked with the file and line
// of the mistake, a CA key others may read is refused, and a host without
// the CA key gets a warning, not an error.
func TestRenewSpec(t *testing.T) {
	withCA := func(extra string) string {
		return tlsSpec[:strings.Index(tlsSpec, "auth:")] + extra + "auth:\n  credentialsFile: pki/credentials\n"
	}
	caKey := func(dir string) { testpki.WriteFile(t, filepath.Join(dir, "pki", "ca.key"), testCA.KeyPEM) }
	for _, tt := range []struct {
		name, extra string
		prepare     func(dir string)
		err, warn   string
	}{
		{"valid, key on the host", "  ca:\n    certFile: pki/ca.crt\n    keyFile: pki/ca.key\n", caKey, "", ""},
		{"key not on this host: a warning", "  ca:\n    certFile: pki/ca.crt\n    keyFile: pki/ca.key\n", nil, "", "spec.yaml:22: tls.ca.keyFile"},
		{"key readable by others", "  ca:\n    certFile: pki/ca.crt\n    keyFile: pki/ca.key\n", func(dir string) {
			caKey(dir)
			_ = os.Chmod(filepath.Join(dir, "pki", "ca.key"), 0o644)
		}, "spec.yaml:22: tls.ca.keyFile:", ""},
		{"key of another CA", "  ca:\n    certFile: pki/ca.crt\n    keyFile: pki/other.key\n", nil, "goes with the key", ""},
		{"not a CA", "  ca:\n    certFile: pki/a.crt\n    keyFile: pki/a.key\n", nil, "spec.yaml:21: tls.ca.certFile: \"", ""},
		{"per-host CA paths, checked per member", "  ca:\n    certFile: pki/{name}.crt\n    keyFile: pki/{name}.key\n", nil, "pki/b.crt\": \"b\" is not a CA certificate", ""},
		{"keyFile without certFile", "  ca:\n    keyFile: pki/ca.key\n", nil, "tls.ca.certFile: missing", ""},
		{"negative before", "  renew:\n    before: -1h\n", nil, "spec.yaml:21: tls.renew.before: -1h0m0s: must not be negative", ""},
		{"another without a name", "  renew:\n    others:\n      - certFile: pki/agent.crt\n        keyFile: pki/agent.key\n", nil, "spec.yaml:22: tls.renew.others[0].name: missing", ""},
		{"another named like a role", "  renew:\n    others:\n      - name: peer\n        certFile: pki/agent.crt\n        keyFile: pki/agent.key\n", nil, "tls.renew.others[0].name: \"peer\": taken", ""},
		{"next is the same CA", "  ca:\n    certFile: pki/ca.crt\n    keyFile: pki/ca.key\n    next:\n      certFile: pki/ca.crt\n", caKey, "the same CA key as tls.ca", ""},
		{"a CA named without its key: status only", "  ca:\n    certFile: pki/ca.crt\n", nil, "", ""},
		{"next without tls.ca", "  ca:\n    next:\n      certFile: pki/ca.crt\n", nil, "tls.ca.next: needs tls.ca.certFile", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := loadTLS(t, withCA(tt.extra), tt.prepare)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err = %v, want one with %q", err, tt.err)
			}
			if tt.warn != "" && (s == nil || !strings.Contains(s.Warnings.Error(), tt.warn)) {
				t.Fatalf("warnings %v, want one with %q", s.Warnings, tt.warn)
			}
		})
	}
}
