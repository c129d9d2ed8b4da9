// Package httpapi serves the agent's HTTP endpoints: /healthz (the loop
// is alive), /readyz (the local member is a healthy voter), /status
// (JSON), /metrics (Prometheus), /history (this agent's events, JSON) and
// /recovery; and reaches them from the
// CLI (Control). Reads are served on agent.addr; changes only on the
// control socket (control.go) and, from the other members, on
// agent.recoveryAddr.
package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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

// Handler builds agent.addr's routes: reads only; a POST gets 403 and is
// pointed to socket, the control socket.
func Handler(src Source, reg *prometheus.Registry, socket string) http.Handler {
	return readOnly(routes(src, reg), socket)
}

// ControlHandler builds the control socket's routes: the reads, and the
// changes (POST /recovery). Serve it only where the caller is known
// (ServeControl).
func ControlHandler(src Source, reg *prometheus.Registry) http.Handler {
	return routes(src, reg)
}

func routes(src Source, reg *prometheus.Registry) *http.ServeMux {
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
	if r, ok := src.(Recoverer); ok {
		addRecovery(mux, r)
	}
	if h, ok := src.(Historian); ok {
		addHistory(mux, h)
	}
	if p, ok := src.(Pauser); ok {
		addPause(mux, p)
	}
	if t, ok := src.(TurnSource); ok {
		addTurn(mux, t, t.TurnConflict)
	}
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
	return ServeTLS(ctx, lg, addr, h, nil)
}
