package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Recoverer is an agent's side of a recovery from quorum loss.
type Recoverer interface {
	// Inspect reports the member's data (GET /recovery).
	Inspect() recovery.Inspection
	// Recover journals a recovery request (POST /recovery).
	Recover(recovery.Request) (recovery.Journal, error)
}

// maxRequest bounds a recovery request's body.
const maxRequest = 64 << 10

// RecoveryHandler serves /recovery, and /pause and /resume (a pause taken
// without quorum reaches the other hosts' agents the same way): what the
// cross-host listener (agent.recoveryAddr) exposes. With members (over
// mutual TLS), a caller whose certificate names no member of the spec
// gets 403: the peer CA may sign more than the members' certificates
// (kubeadm's etcd CA signs apiserver-etcd-client and healthcheck-client
// too). members nil: no check (agent.recoveryInsecure).
func RecoveryHandler(r Recoverer, members func() []spec.Member) http.Handler {
	mux := http.NewServeMux()
	addRecovery(mux, r)
	if h, ok := r.(Historian); ok {
		addHistory(mux, h) // history reads the mirrors here when the cluster has no quorum
	}
	if p, ok := r.(Pauser); ok {
		addPause(mux, p)
	}
	if members == nil {
		return mux
	}
	return onlyMembers(mux, members)
}

// addRecovery adds the recovery routes.
func addRecovery(mux *http.ServeMux, r Recoverer) {
	mux.HandleFunc("GET /recovery", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Inspect())
	})
	mux.HandleFunc("POST /recovery", func(w http.ResponseWriter, req *http.Request) {
		var rq recovery.Request
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxRequest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rq); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "recovery request: " + err.Error()})
			return
		}
		j, err := r.Recover(rq)
		if err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, j)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// RecoveryTLS is the cross-host listener's TLS, protected like etcd's
// peer port: the member's peer certificate, and every caller must present
// a certificate signed by the peer CA. nil when the spec has no peer TLS.
func RecoveryTLS(peer spec.TLSServer) (*tls.Config, error) {
	if peer.CertFile == "" {
		return nil, nil
	}
	if peer.TrustedCAFile == "" {
		return nil, errors.New("agent.recoveryAddr with tls.peer needs tls.peer.trustedCAFile: callers are checked against the peer CA")
	}
	pool, err := caPool(peer.TrustedCAFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(peer.CertFile, peer.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls.peer certificate: %w", err)
			}
			return &c, nil
		},
	}
	// The peer CA file is read again at every handshake (a CA rotation
	// changes it while the agent runs; `recover` is needed most when no
	// agent can be restarted safely); one that does not read keeps the
	// last good pool.
	var last atomic.Pointer[x509.CertPool]
	last.Store(pool)
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if p, err := caPool(peer.TrustedCAFile); err == nil {
			last.Store(p)
		}
		c := cfg.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = last.Load()
		return c, nil
	}
	return cfg, nil
}

// RecoveryClientTLS is how `recover` calls the other agents: with this
// host's peer certificate, trusting the peer CA.
func RecoveryClientTLS(peer spec.TLSServer) (*tls.Config, error) {
	if peer.CertFile == "" {
		return nil, nil
	}
	pool, err := caPool(peer.TrustedCAFile)
	if err != nil {
		return nil, err
	}
	c, err := tls.LoadX509KeyPair(peer.CertFile, peer.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.peer certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{c}}, nil
}

func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls.peer.trustedCAFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls.peer.trustedCAFile %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// ServeTLS is Serve with TLS (cfg nil: plain HTTP).
func ServeTLS(ctx context.Context, lg *zap.Logger, addr string, h http.Handler, cfg *tls.Config) error {
	l, err := listen(addr, cfg)
	if err != nil {
		return err
	}
	serve(ctx, lg, addr, l, h, cfg != nil)
	return nil
}

// readHeaderTimeout bounds a request's headers on every listener.
const readHeaderTimeout = 5 * time.Second

// listen opens addr, with TLS when cfg is not nil.
func listen(addr string, cfg *tls.Config) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent endpoint %s: %w", addr, err)
	}
	if cfg != nil {
		l = tls.NewListener(l, cfg)
	}
	return l, nil
}

// serve serves h on l (opened for addr) until ctx ends.
func serve(ctx context.Context, lg *zap.Logger, addr string, l net.Listener, h http.Handler, withTLS bool) {
	serveServer(ctx, lg, addr, l, &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}, withTLS)
}

// serveServer runs srv on l (opened for addr) until ctx ends.
func serveServer(ctx context.Context, lg *zap.Logger, addr string, l net.Listener, srv *http.Server, withTLS bool) {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("agent endpoint stopped", zap.String("addr", addr), zap.Error(err))
		}
	}()
	lg.Info("agent endpoint listening", zap.String("addr", l.Addr().String()), zap.Bool("tls", withTLS))
}
