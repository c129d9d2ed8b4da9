package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Turner is an agent's side of its host's turn (etcdkeeper guard,
// maintenance): the command asks for the turn, follows it, and says when
// its work is done. Taken on the control socket only: the host's own
// root or the agent's user (agent.addr serves GET /turn only).
type Turner interface {
	WishTurn(model.TurnWish) (model.TurnProgress, error)
	TurnDone(id string, force bool) (model.TurnProgress, error)
	TurnProgress(id string) model.TurnProgress
}

// TurnSource is a Turner that tells which of its errors refuse a call
// because of another wish (409): one already there, or a running guard's
// that maintenance end would end.
type TurnSource interface {
	Turner
	TurnConflict(error) bool
}

// TurnID is the body of POST /turn/done: the wish whose work is done
// ("": this host's, as maintenance end says); Force ends a running
// guard's too.
type TurnID struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

// addTurn adds POST /turn (the wish), POST /turn/done (the work is over,
// or the wish withdrawn) and GET /turn?id= (where it stands).
func addTurn(mux *http.ServeMux, t Turner, conflict func(error) bool) {
	mux.HandleFunc("POST /turn", func(w http.ResponseWriter, req *http.Request) {
		var wish model.TurnWish
		if !decodeBody(w, req, &wish, "host turn wish") {
			return
		}
		p, err := t.WishTurn(wish)
		switch {
		case err != nil && conflict(err):
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "progress": p})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, p)
		}
	})
	mux.HandleFunc("POST /turn/done", func(w http.ResponseWriter, req *http.Request) {
		var id TurnID
		if !decodeBody(w, req, &id, "host turn") {
			return
		}
		p, err := t.TurnDone(id.ID, id.Force)
		switch {
		case err != nil && conflict(err):
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "progress": p})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, p)
		}
	})
	mux.HandleFunc("GET /turn", func(w http.ResponseWriter, req *http.Request) {
		writeJSON(w, http.StatusOK, t.TurnProgress(req.URL.Query().Get("id")))
	})
}

func decodeBody(w http.ResponseWriter, req *http.Request, v any, what string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": what + ": " + err.Error()})
		return false
	}
	return true
}
