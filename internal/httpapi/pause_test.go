package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

type fakePauser struct {
	agentSource
	mu    sync.Mutex
	kept  *model.Pause
	calls int
}

func (f *fakePauser) PauseLocal(p model.Pause) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.kept = &p
	return nil
}

func (f *fakePauser) ResumeLocal() (*model.Pause, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	was := f.kept
	f.kept = nil
	return was, nil
}

// TestPauseRoutes: the control socket's routes take a pause and a resume
// (a request with an unknown field is refused, the agent not asked);
// agent.addr refuses both (403), the agent not asked.
func TestPauseRoutes(t *testing.T) {
	f := &fakePauser{agentSource: agentSource{&fakeRecoverer{}}}
	post := func(h http.Handler, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	ro := Handler(f, prometheus.NewRegistry(), "/var/lib/etcdkeeper/a/agent.sock")
	for _, path := range []string{"/pause", "/resume"} {
		if rec := post(ro, path, `{"by":"x@y"}`); rec.Code != http.StatusForbidden || f.calls != 0 {
			t.Errorf("agent.addr POST %s: %d, %d calls; want 403, the agent not asked", path, rec.Code, f.calls)
		}
	}
	ctl := ControlHandler(f, prometheus.NewRegistry())
	if rec := post(ctl, "/pause", `{"by":"x@y","until":"never"}`); rec.Code != http.StatusBadRequest || f.calls != 0 {
		t.Errorf("POST /pause with a bad until: %d, %d calls; want 400", rec.Code, f.calls)
	}
	if rec := post(ctl, "/pause", `{"by":"x@y","force":true}`); rec.Code != http.StatusBadRequest || f.calls != 0 {
		t.Errorf("POST /pause with an unknown field: %d, %d calls; want 400", rec.Code, f.calls)
	}
	if rec := post(ctl, "/pause", `{"by":"root@node1","reason":"disk"}`); rec.Code != http.StatusOK || f.kept == nil || f.kept.By != "root@node1" {
		t.Errorf("POST /pause: %d %s, kept %+v", rec.Code, rec.Body, f.kept)
	}
	if rec := post(ctl, "/resume", ``); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"by": "root@node1"`) || f.kept != nil {
		t.Errorf("POST /resume: %d %s, kept %+v; want the pause it ended", rec.Code, rec.Body, f.kept)
	}
	if rec := post(ctl, "/resume", ``); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "null" {
		t.Errorf("a second POST /resume: %d %s; want null", rec.Code, rec.Body)
	}
}
