// Package httpapi serves the agent's HTTP endpoint: /healthz (the loop is
// alive), /readyz (the local member is a healthy voter), /status (JSON)
// and /metrics (Prometheus).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Source is what the endpoint reports on.
type Source interface {
	// StatusJSON is the value /status encodes.
	StatusJSON() any
	// Live: the reconcile loop has run recently.
	Live() (bool, string)
	// Ready: the local member is a healthy voter.
	Ready() (bool, string)
}

// Handler builds the endpoint's routes.
func Handler(src Source, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", probe(src.Live))
	mux.HandleFunc("/readyz", probe(src.Ready))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(src.StatusJSON())
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func probe(check func() (bool, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ok, why := check()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	}
}

// Serve listens on addr until ctx ends. A listen failure is returned at
// once so the caller can report it.
func Serve(ctx context.Context, lg *zap.Logger, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent endpoint %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("agent endpoint stopped", zap.Error(err))
		}
	}()
	lg.Info("agent endpoint listening", zap.String("addr", l.Addr().String()))
	return nil
}
