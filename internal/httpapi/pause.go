package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Pauser is an agent's side of a pause taken while the cluster has no
// quorum to hold it (etcdkeeper pause writes it to each agent it reaches):
// the agent keeps it in its state dir and honours it until resume.
type Pauser interface {
	PauseLocal(model.Pause) error
	// ResumeLocal ends the local pause, and the cluster's pause the agent
	// last read (which the cluster may be unable to delete); it returns
	// the local pause, nil when there was none.
	ResumeLocal() (*model.Pause, error)
}

// addPause adds POST /pause and POST /resume.
func addPause(mux *http.ServeMux, p Pauser) {
	mux.HandleFunc("POST /pause", func(w http.ResponseWriter, req *http.Request) {
		var rq model.Pause
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxRequest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rq); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "pause request: " + err.Error()})
			return
		}
		if err := p.PauseLocal(rq); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, rq)
	})
	mux.HandleFunc("POST /resume", func(w http.ResponseWriter, _ *http.Request) {
		was, err := p.ResumeLocal()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, was)
	})
}
