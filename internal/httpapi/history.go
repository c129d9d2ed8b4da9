package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
)

// Historian is the agent's mirror of its own history, which GET /history
// serves: with no quorum, the CLI reads the mirrors instead of the
// cluster.
type Historian interface {
	History() ([]history.Event, error)
}

func addHistory(mux *http.ServeMux, h Historian) {
	mux.HandleFunc("GET /history", func(w http.ResponseWriter, _ *http.Request) {
		evs, err := h.History()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if evs == nil {
			evs = []history.Event{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(evs)
	})
}
