package spec

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// tlsSpec is a valid spec with TLS on both ports, client certificates
// required, and auth credentials; paths are relative to the spec file.
// Its line numbers are what the cases below expect.
const tlsSpec = `cluster: {name: t}
members:
  - {name: a, peerURLs: [https://127.0.0.1:2380], clientURLs: [https://127.0.0.1:2379]}
  - {name: b, peerURLs: [https://127.0.0.2:2380], clientURLs: [https://127.0.0.2:2379]}
tls:
  client:
    certFile: pki/{name}.crt
    keyFile: pki/{name}.key
    trustedCAFile: pki/ca.crt
    clientCertAuth: true
  peer:
    certFile: pki/{name}-peer.crt
    keyFile: pki/{name}-peer.key
    trustedCAFile: pki/ca.crt
    clientCertAuth: true
  agent:
    certFile: pki/agent.crt
    keyFile: pki/agent.key
    trustedCAFile: pki/ca.crt
auth:
  credentialsFile: pki/credentials
`

// pkiDir makes dir/pki with a CA, certificates for members a and b and the
// agent, a key of another CA, a file that is not PEM, and credentials.
func pkiDir(t *testing.T, dir string) {
	t.Helper()
	pki := filepath.Join(dir, "pki")
	ca := testpki.NewCA(t, "test CA")
	testCA = ca
	testpki.WriteFile(t, filepath.Join(pki, "ca.crt"), ca.CertPEM)
	for i, name := range []string{"a", "b"} {
		ip := net.IPv4(127, 0, 0, byte(i+1))
		ca.Issue(t, name, ip).Write(t, pki, name)
		ca.Issue(t, name, ip).Write(t, pki, name+"-peer")
	}
	ca.Issue(t, "root").Write(t, pki, "agent")
	testpki.NewCA(t, "other").Issue(t, "x").Write(t, pki, "other")
	testpki.WriteFile(t, filepath.Join(pki, "garbage"), []byte("not a certificate\n"))
	testpki.WriteFile(t, filepath.Join(pki, "credentials"), []byte("root:s3cret:with:colons\n"))
}

// testCA is the CA of the pki dir last made, for prepare functions that
// issue certificates of their own.
var testCA *testpki.CA

// loadTLS writes text as dir/spec.yaml next to a fresh pki dir and loads it.
func loadTLS(t *testing.T, text string, prepare func(dir string)) (*Spec, string, error) {
	t.Helper()
	dir := t.TempDir()
	pkiDir(t, dir)
	if prepare != nil {
		prepare(dir)
	}
	path := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	return s, dir, err
}

// TestRecoveryAddrTLS: with tls.peer, agent.recoveryAddr is mutual TLS
// and validates without a word; its callers are checked against the peer
// CA, so tls.peer needs trustedCAFile.
func TestRecoveryAddrTLS(t *testing.T) {
	s, _, err := loadTLS(t, tlsSpec+"agent:\n  recoveryAddr: ':2377'\nbackup: {interval: 0s}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %v, want none", s.Warnings)
	}
	noCA := strings.Replace(strings.Replace(tlsSpec, "    trustedCAFile: pki/ca.crt\n    clientCertAuth: true\n  agent:", "  agent:", 1), "", "", 1)
	_, _, err = loadTLS(t, noCA+"agent:\n  recoveryAddr: ':2377'\n", nil)
	if err == nil || !strings.Contains(err.Error(), "spec.yaml:11: tls.peer: agent.recoveryAddr \":2377\" checks its callers against the peer CA: set tls.peer.trustedCAFile") {
		t.Errorf("tls.peer without trustedCAFile: err = %v, want it at line 11", err)
	}
}

func TestLoadTLS(t *testing.T) {
	s, dir, err := loadTLS(t, tlsSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(dir, "pki")
	if got, want := s.TLS.Client.CertFile, filepath.Join(pki, "{name}.crt"); got != want {
		t.Errorf("tls.client.certFile = %q, want %q (absolute, {name} kept)", got, want)
	}
	b, _ := s.Lookup("b")
	want := TLS{
		Client: TLSServer{CertFile: filepath.Join(pki, "b.crt"), KeyFile: filepath.Join(pki, "b.key"),
			TrustedCAFile: filepath.Join(pki, "ca.crt"), ClientCertAuth: true},
		Peer: TLSServer{CertFile: filepath.Join(pki, "b-peer.crt"), KeyFile: filepath.Join(pki, "b-peer.key"),
			TrustedCAFile: filepath.Join(pki, "ca.crt"), ClientCertAuth: true},
		Agent: TLSClient{CertFile: filepath.Join(pki, "agent.crt"), KeyFile: filepath.Join(pki, "agent.key"),
			TrustedCAFile: filepath.Join(pki, "ca.crt")},
	}
	if !reflect.DeepEqual(b.TLS, want) {
		t.Errorf("member b TLS:\n got %+v\nwant %+v", b.TLS, want)
	}
	if got := s.Auth.CredentialsFile; got != filepath.Join(pki, "credentials") {
		t.Errorf("auth.credentialsFile = %q", got)
	}
	if b.ListenClientURLs[0] != "https://127.0.0.2:2379" {
		t.Errorf("listen client URLs %q, want https", b.ListenClientURLs)
	}
	assertRoundTrip(t, s)
}

func TestTLSValidationErrors(t *testing.T) {
	// replace edits tlsSpec: the first occurrence of each old by new.
	replace := func(pairs ...string) string {
		text := tlsSpec
		for i := 0; i+1 < len(pairs); i += 2 {
			if !strings.Contains(text, pairs[i]) {
				t.Fatalf("tlsSpec has no %q", pairs[i])
			}
			text = strings.Replace(text, pairs[i], pairs[i+1], 1)
		}
		return text
	}
	remove := func(dir string, names ...string) {
		for _, n := range names {
			if err := os.Remove(filepath.Join(dir, "pki", n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	credentials := func(content string) func(string) {
		return func(dir string) { testpki.WriteFile(t, filepath.Join(dir, "pki", "credentials"), []byte(content)) }
	}
	tests := []struct {
		name    string
		spec    string
		prepare func(dir string)
		line    int
		// field starts the message; msg must appear in it.
		field, msg string
	}{
		{"missing file", replace("pki/ca.crt", "pki/nope.crt"), nil,
			9, "tls.client.trustedCAFile", "nope.crt\": cannot read it: no such file or directory"},
		{"one member's file missing", tlsSpec, func(dir string) { remove(dir, "b-peer.key") },
			13, "tls.peer.keyFile", "b-peer.key\" (member b): cannot read it"},
		{"key of another certificate", replace("keyFile: pki/agent.key", "keyFile: pki/other.key"), nil,
			17, "tls.agent.certFile", "are not a pair: tls: private key does not match public key"},
		{"certificate not PEM", replace("certFile: pki/{name}.crt", "certFile: pki/garbage"), nil,
			7, "tls.client.certFile", "are not a pair"},
		{"CA not PEM", replace("trustedCAFile: pki/ca.crt\n    clientCertAuth: true\n  agent", "trustedCAFile: pki/garbage\n    clientCertAuth: true\n  agent"), nil,
			14, "tls.peer.trustedCAFile", "no PEM certificate in it"},
		{"http client URL with tls.client", replace("clientURLs: [https://127.0.0.2:2379]", "clientURLs: [http://127.0.0.2:2379]"), nil,
			4, "members[1].clientURLs[0]", `"http://127.0.0.2:2379": must be https: tls.client.certFile (line 7)`},
		{"http peer URL with tls.peer", replace("peerURLs: [https://127.0.0.1:2380]", "peerURLs: [http://127.0.0.1:2380]"), nil,
			3, "members[0].peerURLs[0]", "must be https: tls.peer.certFile (line 12)"},
		{"written listen URL with the wrong scheme", replace("clientURLs: [https://127.0.0.2:2379]}",
			"clientURLs: [https://127.0.0.2:2379], listenClientURLs: [http://127.0.0.2:2379]}"), nil,
			4, "members[1].listenClientURLs[0]", "must be https"},
		{"https without tls", strings.Replace(twoMembers, "http://10.0.0.1:2379", "https://10.0.0.1:2379", 1), nil,
			3, "members[0].clientURLs[0]", "must be http: tls.client sets no certFile and keyFile"},
		{"client certificates without an agent certificate", replace("  agent:\n    certFile: pki/agent.crt\n    keyFile: pki/agent.key\n", "  agent:\n"), nil,
			16, "tls.agent", "missing: tls.client.clientCertAuth is true"},
		// etcd demands client certificates whenever tls.client has a
		// trusted CA (client/pkg/v3 transport), clientCertAuth or not.
		{"a trusted CA without clientCertAuth, no agent certificate", replace("clientCertAuth: true", "clientCertAuth: false",
			"  agent:\n    certFile: pki/agent.crt\n    keyFile: pki/agent.key\n", "  agent:\n"), nil,
			9, "tls.agent", "tls.client.trustedCAFile is set, and then etcd demands a client certificate of every client even with clientCertAuth false"},
		{"peer certificate for serverAuth only", tlsSpec, func(dir string) {
			testCA.IssueUsages(t, "b", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, net.IPv4(127, 0, 0, 2)).Write(t, filepath.Join(dir, "pki"), "b-peer")
		}, 12, "tls.peer.certFile", `(member b): its extended key usage is serverAuth only, without clientAuth: a member presents its peer certificate both as a server and`},
		{"peer certificate for clientAuth only", tlsSpec, func(dir string) {
			testCA.IssueUsages(t, "a", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, net.IPv4(127, 0, 0, 1)).Write(t, filepath.Join(dir, "pki"), "a-peer")
		}, 12, "tls.peer.certFile", `(member a): its extended key usage is clientAuth only, without serverAuth`},
		{"agent certificate without clientAuth", tlsSpec, func(dir string) {
			testCA.IssueUsages(t, "root", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}).Write(t, filepath.Join(dir, "pki"), "agent")
		}, 17, "tls.agent.certFile", "its extended key usage is serverAuth only, without clientAuth: the agent presents it to etcd as its client certificate"},
		{"server certificate without serverAuth", tlsSpec, func(dir string) {
			testCA.IssueUsages(t, "a", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, net.IPv4(127, 0, 0, 1)).Write(t, filepath.Join(dir, "pki"), "a")
		}, 7, "tls.client.certFile", "(member a): its extended key usage is clientAuth only, without serverAuth: the agent and etcd's clients check it"},
		{"certFile without keyFile", replace("    keyFile: pki/{name}-peer.key\n", ""), nil,
			12, "tls.peer.keyFile", "missing: certFile needs the private key"},
		{"keyFile without certFile", replace("    certFile: pki/agent.crt\n", ""), nil,
			17, "tls.agent.certFile", "missing: keyFile needs the certificate"},
		{"clientCertAuth without a CA", replace("    trustedCAFile: pki/ca.crt\n    clientCertAuth: true\n  peer", "    clientCertAuth: true\n  peer"), nil,
			9, "tls.client.clientCertAuth", "needs tls.client.trustedCAFile"},
		{"clientCertAuth not a bool", replace("clientCertAuth: true", "clientCertAuth: yes please"), nil,
			10, "tls.client.clientCertAuth", "must be true or false"},
		{"misspelt key", replace("certFile: pki/agent.crt", "certfile: pki/agent.crt"), nil,
			17, "tls.agent.certfile", "did you mean certFile?"},
		{"unknown auth key", tlsSpec + "  server: {}\n", nil,
			22, "auth.server", "unknown key"},
		{"TLS in etcd.flags", tlsSpec + "etcd:\n  flags: {peer-cert-file: /x.crt}\n", nil,
			23, "etcd.flags.peer-cert-file", "remove it: set tls.peer.certFile"},
		{"tilde path", replace("pki/agent.crt", "~/agent.crt"), nil,
			17, "tls.agent.certFile", "~ is not expanded"},
		{"credentials file missing", tlsSpec, func(dir string) { remove(dir, "credentials") },
			21, "auth.credentialsFile", "cannot read it: no such file or directory"},
		{"credentials without a colon", tlsSpec, credentials("s3cret\n"),
			21, "auth.credentialsFile", "has no ':'"},
		{"credentials without a user", tlsSpec, credentials(":s3cret\n"),
			21, "auth.credentialsFile", "the user before ':' is empty"},
		{"credentials without a password", tlsSpec, credentials("root:\nroot:s3cret\n"),
			21, "auth.credentialsFile", "the password after ':' is empty"},
		{"credentials file per member", replace("pki/credentials", "pki/{name}.credentials"), nil,
			21, "auth.credentialsFile", "{name} is not expanded here"},
		{"peer certificate of another CA", tlsSpec, func(dir string) {
			testpki.NewCA(t, "other").Issue(t, "b", net.IPv4(127, 0, 0, 2)).Write(t, filepath.Join(dir, "pki"), "b-peer")
		}, 12, "tls.peer.certFile", "(member b): not signed by tls.peer.trustedCAFile"},
		{"agent certificate of another CA", replace("certFile: pki/agent.crt\n    keyFile: pki/agent.key", "certFile: pki/other.crt\n    keyFile: pki/other.key"), nil,
			17, "tls.agent.certFile", "not signed by tls.client.trustedCAFile"},
		{"server certificate for another address", tlsSpec, func(dir string) {
			testCA.Issue(t, "b", net.IPv4(127, 0, 0, 9)).Write(t, filepath.Join(dir, "pki"), "b")
		}, 7, "tls.client.certFile", `(member b): does not cover https://127.0.0.2:2379 (it covers DNS b, IP 127.0.0.9)`},
		{"shared server certificate of no member", replace("certFile: pki/{name}.crt\n    keyFile: pki/{name}.key", "certFile: pki/agent.crt\n    keyFile: pki/agent.key"), nil,
			7, "tls.client.certFile", "covers no member's URLs (it covers DNS root; the members' are https://127.0.0.1:2379, https://127.0.0.2:2379)"},
		{"peer certificate for another address", tlsSpec, func(dir string) {
			testCA.Issue(t, "a").Write(t, filepath.Join(dir, "pki"), "a-peer")
		}, 12, "tls.peer.certFile", `(member a): does not cover https://127.0.0.1:2380`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := loadTLS(t, tt.spec, tt.prepare)
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load = %v, want *Errors", err)
			}
			for _, e := range *errs {
				if e.Line == tt.line && strings.HasPrefix(e.Msg, tt.field+":") && strings.Contains(e.Msg, tt.msg) {
					if strings.Contains(errs.Error(), "s3cret") {
						t.Errorf("an error shows the password:\n%v", errs)
					}
					return
				}
			}
			t.Errorf("no error at line %d starts with %q and contains %q; got:\n%v", tt.line, tt.field, tt.msg, errs)
		})
	}
}

// TestTLSUsagesAllowed: certificates without the extended key usage
// extension allow every usage; a peer certificate for serverAuth only is
// enough while the members check no client certificates (no
// tls.peer.trustedCAFile, no clientCertAuth).
func TestTLSUsagesAllowed(t *testing.T) {
	t.Run("no extended key usage", func(t *testing.T) {
		_, _, err := loadTLS(t, tlsSpec, func(dir string) {
			pki := filepath.Join(dir, "pki")
			testCA.IssueUsages(t, "a", nil, net.IPv4(127, 0, 0, 1)).Write(t, pki, "a-peer")
			testCA.IssueUsages(t, "a", nil, net.IPv4(127, 0, 0, 1)).Write(t, pki, "a")
			testCA.IssueUsages(t, "root", nil).Write(t, pki, "agent")
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("serverAuth peer certificate, peers check no client certificates", func(t *testing.T) {
		text := strings.Replace(tlsSpec, "    trustedCAFile: pki/ca.crt\n    clientCertAuth: true\n  agent", "  agent", 1)
		_, _, err := loadTLS(t, text, func(dir string) {
			testCA.IssueUsages(t, "b", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, net.IPv4(127, 0, 0, 2)).Write(t, filepath.Join(dir, "pki"), "b-peer")
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestCertificateNotValidNow: an expired or not yet valid certificate is
// a warning marked Expired: the agent still runs (and reports it);
// validate and import refuse it.
func TestCertificateNotValidNow(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(dir string)
		line    int
		field   string
		msg     string
	}{
		{"expired peer certificate", func(dir string) {
			testCA.IssueValid(t, "a", time.Now().Add(-400*24*time.Hour), time.Now().Add(-35*24*time.Hour), net.IPv4(127, 0, 0, 1)).Write(t, filepath.Join(dir, "pki"), "a-peer")
		}, 12, "tls.peer.certFile", "/pki/a-peer.crt\" (member a): expired on "},
		{"not yet valid", func(dir string) {
			testCA.IssueValid(t, "a", time.Now().Add(24*time.Hour), time.Now().Add(400*24*time.Hour), net.IPv4(127, 0, 0, 1)).Write(t, filepath.Join(dir, "pki"), "a")
		}, 7, "tls.client.certFile", "not valid before "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := loadTLS(t, tlsSpec, tt.prepare)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range s.Warnings.Expired() {
				if e.Line == tt.line && strings.HasPrefix(e.Msg, tt.field+":") && strings.Contains(e.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("no expired warning at line %d starts with %q and contains %q; got:\n%v", tt.line, tt.field, tt.msg, &s.Warnings)
		})
	}
}

// TestCertificateExpiresSoon: a certificate that expires within 30 days is
// a warning, not an error: the spec loads, and validate says what to do.
func TestCertificateExpiresSoon(t *testing.T) {
	s, _, err := loadTLS(t, tlsSpec, func(dir string) {
		testCA.IssueValid(t, "b", time.Now().Add(-time.Hour), time.Now().Add(10*24*time.Hour), net.IPv4(127, 0, 0, 2)).Write(t, filepath.Join(dir, "pki"), "b-peer")
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `tls.peer.certFile: "` + ``
	found := false
	for _, w := range s.Warnings {
		if w.Line == 12 && strings.HasPrefix(w.Msg, want) && strings.Contains(w.Msg, `b-peer.crt" (member b): expires on `) && strings.Contains(w.Msg, "in 9 days") {
			found = true
		}
	}
	if !found {
		t.Errorf("warnings = %v, want one at line 12 that b's peer certificate expires in 9 days", s.Warnings)
	}
}

// TestSharedFileReportedOnce: a path without {name} is one file, however
// many members use it.
func TestSharedFileReportedOnce(t *testing.T) {
	_, _, err := loadTLS(t, tlsSpec, func(dir string) {
		if err := os.Remove(filepath.Join(dir, "pki", "ca.crt")); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil {
		t.Fatal("Load succeeded without the CA file")
	}
	// One error per key that names the CA: client, peer and agent.
	if n := strings.Count(err.Error(), "ca.crt\": cannot read it"); n != 3 {
		t.Errorf("%d errors about ca.crt, want 3 (one per key):\n%v", n, err)
	}
}

func TestParseCredentials(t *testing.T) {
	tests := []struct {
		in, user, pass, err string
	}{
		{"root:pw\n", "root", "pw", ""},
		{"root:p:w\r\nignored", "root", "p:w", ""},
		{"root:pw", "root", "pw", ""},
		{"", "", "", "has no ':'"},
		{"\nroot:pw\n", "", "", "has no ':'"},
		{":pw\n", "", "", "user before ':' is empty"},
		{"root:\n", "", "", "password after ':' is empty"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			user, pass, err := ParseCredentials([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil || user != tt.user || pass != tt.pass {
				t.Errorf("= %q, %q, %v; want %q, %q", user, pass, err, tt.user, tt.pass)
			}
		})
	}
}
