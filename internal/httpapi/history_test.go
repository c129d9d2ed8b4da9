package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
)

type historySource struct{ evs []history.Event }

func (historySource) StatusJSON() any                     { return nil }
func (historySource) Live() (bool, string)                { return true, "" }
func (historySource) Ready() (bool, string)               { return true, "" }
func (h historySource) History() ([]history.Event, error) { return h.evs, nil }

// TestHistoryIsServedReadOnly: agent.addr (reads only) serves the
// agent's mirror as JSON; with nothing recorded, an empty list.
func TestHistoryIsServedReadOnly(t *testing.T) {
	ev := history.Event{Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Host: "node1", Kind: "repair-done", MemberID: "8e9e05c52164694d", Reason: "walpb: crc mismatch"}
	for _, c := range []struct {
		name string
		evs  []history.Event
		want int
	}{{"events", []history.Event{ev}, 1}, {"none", nil, 0}} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(historySource{c.evs}, prometheus.NewRegistry(), "/run/sock"))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/history")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got []history.Event
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /history: %d, %v", resp.StatusCode, err)
			}
			if got == nil || len(got) != c.want || (c.want == 1 && got[0].ID() != ev.ID()) {
				t.Fatalf("GET /history = %+v, want %d events", got, c.want)
			}
		})
	}
}
