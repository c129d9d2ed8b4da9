package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeRecoverer answers GET /recovery with ins and POST /recovery with a
// journal of the request, or err; it counts what it was asked.
type fakeRecoverer struct {
	ins recovery.Inspection
	err error

	mu        sync.Mutex
	inspected int
	requests  []recovery.Request
}

func (f *fakeRecoverer) Inspect() recovery.Inspection {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inspected++
	return f.ins
}

func (f *fakeRecoverer) Recover(r recovery.Request) (recovery.Journal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	if f.err != nil {
		return recovery.Journal{}, f.err
	}
	return recovery.Journal{Request: r, Step: recovery.StepRequested, OldMemberID: 2}, nil
}

func (f *fakeRecoverer) calls() (int, []recovery.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inspected, append([]recovery.Request(nil), f.requests...)
}

// recoveryPKI is a peer CA with the server's certificate (for 127.0.0.1)
// and a peer's, and another CA with a certificate of its own, written
// to a temporary dir.
type recoveryPKI struct {
	server, peer, stranger spec.TLSServer
	// apiClient is signed by the peer CA but names no member (kubeadm's
	// etcd CA signs apiserver-etcd-client too).
	apiClient spec.TLSServer
	peerCA    *x509.CertPool
}

func newRecoveryPKI(t *testing.T) recoveryPKI {
	t.Helper()
	dir := t.TempDir()
	peerCA, otherCA := testpki.NewCA(t, "etcd-peer-ca"), testpki.NewCA(t, "another-ca")
	peerCAFile, otherCAFile := filepath.Join(dir, "peer-ca.crt"), filepath.Join(dir, "other-ca.crt")
	testpki.WriteFile(t, peerCAFile, peerCA.CertPEM)
	testpki.WriteFile(t, otherCAFile, otherCA.CertPEM)
	tlsOf := func(p testpki.Pair, name, ca string) spec.TLSServer {
		cert, key := p.Write(t, dir, name)
		return spec.TLSServer{CertFile: cert, KeyFile: key, TrustedCAFile: ca, ClientCertAuth: true}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(peerCA.CertPEM)
	return recoveryPKI{
		server: tlsOf(peerCA.Issue(t, "node1", net.ParseIP("127.0.0.1")), "node1", peerCAFile),
		peer:   tlsOf(peerCA.Issue(t, "node2", net.ParseIP("127.0.0.2")), "node2", peerCAFile),
		// Trusts the peer CA (it reaches the server), but its own
		// certificate comes from another CA.
		stranger:  tlsOf(otherCA.Issue(t, "node2", net.ParseIP("127.0.0.2")), "stranger", peerCAFile),
		apiClient: tlsOf(peerCA.Issue(t, "apiserver-etcd-client"), "apiserver-etcd-client", peerCAFile),
		peerCA:    pool,
	}
}

// serveRecovery serves RecoveryHandler(r) over RecoveryTLS(server) on
// 127.0.0.1 as ServeTLS does, until the test ends, and returns its URL.
func serveRecovery(t *testing.T, server spec.TLSServer, r Recoverer) string {
	t.Helper()
	cfg, err := RecoveryTLS(server)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		t.Fatal("RecoveryTLS with a certificate gave no TLS")
	}
	l, err := listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	serve(ctx, zap.NewNop(), "127.0.0.1:0", l, RecoveryHandler(r, func() []spec.Member { return testMembers }), true)
	return "https://" + l.Addr().String()
}

// testMembers are the spec's members the recovery listener's callers
// must name.
var testMembers = []spec.Member{
	{Name: "node1", PeerURLs: []string{"https://127.0.0.1:2380"}},
	{Name: "node2", PeerURLs: []string{"https://127.0.0.2:2380"}},
}

func client(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// TestRecoveryEndpoint: over mutual TLS with the peer CA, a peer reaches
// /recovery and nothing else; the handler's answers are JSON with the
// status that says what happened.
func TestRecoveryEndpoint(t *testing.T) {
	pki := newRecoveryPKI(t)
	ins := recovery.Inspection{Name: "node1", Reachable: true, Data: "healthy", ClusterID: "c1", MemberID: "1", Term: 4, Index: 120, Revision: 60,
		Snapshot: &recovery.Snapshot{Path: "/snap/a.db", TakenAt: time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC), Revision: 50, Keys: 7, Size: 4096}}
	ok := &fakeRecoverer{ins: ins}
	busy := &fakeRecoverer{ins: ins, err: errors.New("recovery r0 is under way here (source, step stopped): one at a time")}
	okURL, busyURL := serveRecovery(t, pki.server, ok), serveRecovery(t, pki.server, busy)
	peerCfg, err := RecoveryClientTLS(pki.peer)
	if err != nil {
		t.Fatal(err)
	}
	peer := client(peerCfg)
	req := recovery.Request{ID: "r1", Role: recovery.RoleFenced, Source: "node3", OldClusterID: 0xc1}
	reqJSON, _ := json.Marshal(req)

	tests := []struct {
		name, method, path, body string
		busy                     bool
		code                     int
		// want is what the JSON answer decodes to (nil: not JSON, or
		// not checked); errPart a part of its "error".
		want    any
		errPart string
		// recovered: the request the Recoverer got (nil: none).
		recovered *recovery.Request
	}{
		{name: "GET /recovery: the inspection", method: "GET", path: "/recovery", code: http.StatusOK, want: &ins},
		{name: "POST /recovery: accepted, the journal", method: "POST", path: "/recovery", body: string(reqJSON), code: http.StatusAccepted,
			want: &recovery.Journal{Request: req, Step: recovery.StepRequested, OldMemberID: 2}, recovered: &req},
		{name: "POST /recovery refused by the agent: conflict", method: "POST", path: "/recovery", body: string(reqJSON), busy: true, code: http.StatusConflict,
			errPart: "recovery r0 is under way here (source, step stopped): one at a time", recovered: &req},
		{name: "POST /recovery with an unknown field: bad request, the agent not asked", method: "POST", path: "/recovery",
			body: `{"id":"r1","role":"fenced","source":"node3","force":true}`, code: http.StatusBadRequest, errPart: `recovery request: json: unknown field "force"`},
		{name: "POST /recovery, not JSON: bad request", method: "POST", path: "/recovery", body: "id=r1", code: http.StatusBadRequest, errPart: "recovery request: "},
		{name: "POST /recovery, a body over 64 KiB: bad request", method: "POST", path: "/recovery",
			body: `{"id":"` + strings.Repeat("r", maxRequest) + `"}`, code: http.StatusBadRequest, errPart: "request body too large"},
		{name: "PUT /recovery: method not allowed", method: "PUT", path: "/recovery", body: string(reqJSON), code: http.StatusMethodNotAllowed},
		{name: "GET /status: not served here", method: "GET", path: "/status", code: http.StatusNotFound},
		{name: "GET /metrics: not served here", method: "GET", path: "/metrics", code: http.StatusNotFound},
		{name: "GET /healthz: not served here", method: "GET", path: "/healthz", code: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, fake := okURL, ok
			if tt.busy {
				url, fake = busyURL, busy
			}
			inspected, before := fake.calls()
			hr, err := http.NewRequest(tt.method, url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := peer.Do(hr)
			if err != nil {
				t.Fatalf("a peer with a certificate of the peer CA: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.code)
			}
			if tt.want != nil || tt.errPart != "" {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
			}
			if tt.want != nil {
				got := reflect.New(reflect.TypeOf(tt.want).Elem()).Interface()
				if err := json.Unmarshal(body, got); err != nil {
					t.Fatalf("answer does not decode: %v: %s", err, body)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("answer %+v, want %+v", got, tt.want)
				}
			}
			if tt.errPart != "" {
				var e map[string]string
				if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e["error"], tt.errPart) {
					t.Errorf("answer %s (%v), want an error with %q", body, err, tt.errPart)
				}
			}
			afterInspected, after := fake.calls()
			if wantN := len(before) + map[bool]int{false: 0, true: 1}[tt.recovered != nil]; len(after) != wantN {
				t.Fatalf("the Recoverer got %d requests, want %d", len(after)-len(before), wantN-len(before))
			}
			if tt.recovered != nil && !reflect.DeepEqual(after[len(after)-1], *tt.recovered) {
				t.Errorf("the Recoverer got %+v, want %+v", after[len(after)-1], *tt.recovered)
			}
			if wantInspect := tt.method == "GET" && tt.path == "/recovery"; (afterInspected > inspected) != wantInspect {
				t.Errorf("inspected %d times, want inspected: %v", afterInspected-inspected, wantInspect)
			}
		})
	}
}

// TestRecoveryEndpointRefusesStrangers: a caller without a certificate,
// or with one another CA signed, is refused at the TLS handshake: the
// Recoverer is never asked.
func TestRecoveryEndpointRefusesStrangers(t *testing.T) {
	pki := newRecoveryPKI(t)
	fake := &fakeRecoverer{ins: recovery.Inspection{Name: "node1", Reachable: true}}
	url := serveRecovery(t, pki.server, fake)
	strangerCfg, err := RecoveryClientTLS(pki.stranger)
	if err != nil {
		t.Fatal(err)
	}
	// Go's client sends no certificate that the server's list of CAs
	// does not name; a stranger sends it anyway.
	stranger := strangerCfg.Certificates[0]
	strangerCfg.Certificates = nil
	strangerCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }
	tls12 := func(c *tls.Config) *tls.Config {
		c = c.Clone()
		c.MaxVersion = tls.VersionTLS12
		return c
	}
	for _, tt := range []struct {
		name string
		cfg  *tls.Config
		// alert is the TLS alert the server sends.
		alert string
	}{
		{name: "no client certificate", cfg: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pki.peerCA}, alert: "certificate required"},
		{name: "no client certificate, TLS 1.2", cfg: &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, RootCAs: pki.peerCA},
			alert: "handshake failure"},
		{name: "a certificate of another CA", cfg: strangerCfg, alert: "unknown certificate authority"},
		{name: "a certificate of another CA, TLS 1.2", cfg: tls12(strangerCfg), alert: "unknown certificate authority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The handshake itself: with TLS 1.3 the client learns of the
			// refusal on its first read, before any request is served.
			conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), tt.cfg)
			if err == nil {
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				_ = conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "remote error: tls: "+tt.alert) {
				t.Errorf("handshake: %v, want the server's alert %q", err, tt.alert)
			}
			for _, method := range []string{"GET", "POST"} {
				req, _ := http.NewRequest(method, url+"/recovery", strings.NewReader(`{"id":"r1","role":"fenced","source":"node3"}`))
				resp, err := client(tt.cfg).Do(req)
				if err == nil {
					_ = resp.Body.Close()
					t.Errorf("%s /recovery: served (%s), want refused at the handshake", method, resp.Status)
				} else if !strings.Contains(err.Error(), "remote error: tls: ") {
					t.Errorf("%s /recovery: %v, want a TLS alert", method, err)
				}
			}
			if inspected, requests := fake.calls(); inspected != 0 || len(requests) != 0 {
				t.Errorf("the Recoverer was asked: inspected %d times, %d requests", inspected, len(requests))
			}
		})
	}
}

// TestRecoveryEndpointTakesMembersOnly: a certificate the peer CA signed
// is not enough: it must name a member of the spec. A client certificate
// of the same CA (CN=apiserver-etcd-client) is refused, for reads and
// changes, and the agent is not asked; a member's peer certificate is
// taken.
func TestRecoveryEndpointTakesMembersOnly(t *testing.T) {
	pki := newRecoveryPKI(t)
	fake := &fakeRecoverer{ins: recovery.Inspection{Name: "node1", Reachable: true}}
	url := serveRecovery(t, pki.server, fake)
	body := `{"id":"r1","role":"fenced","source":"node3"}`
	for _, tt := range []struct {
		name   string
		caller spec.TLSServer
		want   int
	}{
		{"apiserver-etcd-client, signed by the peer CA", pki.apiClient, http.StatusForbidden},
		{"node2's peer certificate", pki.peer, http.StatusAccepted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := RecoveryClientTLS(tt.caller)
			if err != nil {
				t.Fatal(err)
			}
			_, before := fake.calls()
			req, _ := http.NewRequest(http.MethodPost, url+"/recovery", strings.NewReader(body))
			resp, err := client(cfg).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			_, after := fake.calls()
			if resp.StatusCode != tt.want || (len(after) > len(before)) != (tt.want == http.StatusAccepted) {
				t.Fatalf("POST: %s %s, agent asked %d times; want %d", resp.Status, b, len(after)-len(before), tt.want)
			}
			if tt.want == http.StatusForbidden && !strings.Contains(string(b), `the certificate \"apiserver-etcd-client\"`) {
				t.Errorf("refusal %s does not name the certificate", b)
			}
			get, _ := http.NewRequest(http.MethodGet, url+"/recovery", nil)
			resp, err = client(cfg).Do(get)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if wantGet := map[bool]int{true: http.StatusForbidden, false: http.StatusOK}[tt.want == http.StatusForbidden]; resp.StatusCode != wantGet {
				t.Errorf("GET: %s, want %d", resp.Status, wantGet)
			}
		})
	}
}

// TestMemberNamed: which certificates name a member: by the common name
// or a DNS name equal to the member's name or its peer URL's host, or an
// IP equal to its peer URL's IP.
func TestMemberNamed(t *testing.T) {
	members := []spec.Member{
		{Name: "cp1", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{Name: "cp2", PeerURLs: []string{"https://cp2.example.com:2380"}},
	}
	for _, tt := range []struct {
		name string
		cert x509.Certificate
		want string
	}{
		{"CN is a member's name", x509.Certificate{Subject: pkix.Name{CommonName: "cp1"}}, "cp1"},
		{"DNS name is a peer URL's host", x509.Certificate{Subject: pkix.Name{CommonName: "etcd-peer"}, DNSNames: []string{"localhost", "CP2.example.com"}}, "cp2"},
		{"IP is a peer URL's IP", x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}}, "cp1"},
		{"kubeadm's apiserver-etcd-client", x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"}}, ""},
		{"kubeadm's healthcheck-client", x509.Certificate{Subject: pkix.Name{CommonName: "kube-etcd-healthcheck-client"}}, ""},
		{"localhost and loopback only", x509.Certificate{Subject: pkix.Name{CommonName: "cp3"}, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, ""},
		{"a DNS name that is a member's IP", x509.Certificate{DNSNames: []string{"10.0.0.1"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := memberNamed(&tt.cert, members); got != tt.want || ok != (tt.want != "") {
				t.Errorf("memberNamed = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// TestRecoveryTLS: no peer TLS, no TLS; a peer certificate needs the peer
// CA to check callers against.
func TestRecoveryTLS(t *testing.T) {
	pki := newRecoveryPKI(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not-pem.crt")
	testpki.WriteFile(t, notPEM, []byte("not a certificate\n"))
	with := func(mod func(*spec.TLSServer)) spec.TLSServer {
		s := pki.server
		mod(&s)
		return s
	}
	for _, tt := range []struct {
		name  string
		peer  spec.TLSServer
		noTLS bool
		err   string
	}{
		{name: "no peer TLS: plain HTTP", peer: spec.TLSServer{}, noTLS: true},
		{name: "the peer certificate and CA: mutual TLS", peer: pki.server},
		{name: "a peer certificate without trustedCAFile", peer: with(func(s *spec.TLSServer) { s.TrustedCAFile = "" }),
			err: "agent.recoveryAddr with tls.peer needs tls.peer.trustedCAFile"},
		{name: "trustedCAFile missing", peer: with(func(s *spec.TLSServer) { s.TrustedCAFile = filepath.Join(dir, "gone.crt") }),
			err: "tls.peer.trustedCAFile: open "},
		{name: "trustedCAFile without a certificate", peer: with(func(s *spec.TLSServer) { s.TrustedCAFile = notPEM }),
			err: "no PEM certificate in it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := RecoveryTLS(tt.peer)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) || cfg != nil {
					t.Fatalf("RecoveryTLS = %v, %v; want no config and an error with %q", cfg, err, tt.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tt.noTLS:
				if cfg != nil {
					t.Fatalf("TLS config %v without peer TLS", cfg)
				}
				return
			}
			if cfg == nil || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil || cfg.MinVersion < tls.VersionTLS12 {
				t.Fatalf("config %+v: want client certificates required and verified against the peer CA", cfg)
			}
			if c, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c == nil {
				t.Errorf("server certificate: %v", err)
			}
		})
	}
	if cfg, err := RecoveryClientTLS(spec.TLSServer{}); cfg != nil || err != nil {
		t.Errorf("RecoveryClientTLS without peer TLS = %v, %v; want plain HTTP", cfg, err)
	}
	if _, err := RecoveryClientTLS(with(func(s *spec.TLSServer) { s.KeyFile = notPEM })); err == nil || !strings.Contains(err.Error(), "tls.peer certificate") {
		t.Errorf("RecoveryClientTLS with a bad key: %v, want a tls.peer certificate error", err)
	}
}

// TestServeTLSListenError: ServeTLS reports a listen failure at once.
func TestServeTLSListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = ServeTLS(context.Background(), zap.NewNop(), l.Addr().String(), RecoveryHandler(&fakeRecoverer{}, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "agent endpoint "+l.Addr().String()) {
		t.Errorf("ServeTLS on a port in use: %v, want an agent endpoint error", err)
	}
}

// agentSource is an agent endpoint's source that also takes recoveries.
type agentSource struct{ *fakeRecoverer }

func (agentSource) StatusJSON() any       { return map[string]string{} }
func (agentSource) Live() (bool, string)  { return true, "ok" }
func (agentSource) Ready() (bool, string) { return true, "ok" }

// TestAgentEndpointServesReadsOnly: agent.addr takes no change from
// anyone, loopback included (any local user, a hostNetwork pod or a local
// proxy has a loopback address): a POST gets 403, naming the control
// socket, and the agent is not asked. Reads are served.
func TestAgentEndpointServesReadsOnly(t *testing.T) {
	for _, remote := range []string{"127.0.0.1:40000", "[::1]:40000", "10.0.0.5:40000", "198.18.0.7:40000"} {
		f := &fakeRecoverer{}
		h := Handler(agentSource{f}, prometheus.NewRegistry(), "/var/lib/etcdkeeper/a/agent.sock")
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req := httptest.NewRequest(method, "/recovery", strings.NewReader(`{"id":"r1","role":"fenced","source":"a"}`))
			req.RemoteAddr = remote
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if _, reqs := f.calls(); rec.Code != http.StatusForbidden || len(reqs) != 0 || !strings.Contains(rec.Body.String(), "/var/lib/etcdkeeper/a/agent.sock") {
				t.Errorf("%s /recovery from %s: %d, %d calls, %s; want 403 naming the socket, the agent not asked", method, remote, rec.Code, len(reqs), rec.Body)
			}
		}
		for _, path := range []string{"/recovery", "/status", "/healthz", "/readyz", "/metrics"} {
			get := httptest.NewRequest(http.MethodGet, path, nil)
			get.RemoteAddr = remote
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, get)
			if rec.Code != http.StatusOK {
				t.Errorf("GET %s from %s: %d, want 200", path, remote, rec.Code)
			}
		}
	}
}
