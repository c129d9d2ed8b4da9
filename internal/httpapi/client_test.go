package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestControlRoutes: this host's agent is reached through its socket,
// for reads and changes; another host's agent takes no change without
// agent.recoveryAddr (refused here, before any call); an agent whose
// socket is found here (a test bed) is on this host too.
func TestControlRoutes(t *testing.T) {
	dirA, dirB := socketDir(t), socketDir(t)
	s := &spec.Spec{Members: []spec.Member{
		{Name: "a", StateDir: dirA, AgentAddr: "127.0.0.1:1", PeerURLs: []string{"http://127.0.0.1:2380"}},
		{Name: "b", StateDir: dirB, AgentAddr: "127.0.0.2:1", PeerURLs: []string{"http://127.0.0.2:2380"}},
	}}
	fake := &fakeRecoverer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ServeControl(ctx, zap.NewNop(), SocketPath(dirA), ControlHandler(agentSource{fake}, nil)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"r1","role":"fenced","source":"b"}`)

	onA, err := NewControl(s, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !onA.Local(s.Members[0]) || onA.Local(s.Members[1]) {
		t.Errorf("on a: local a %v, b %v; want a only", onA.Local(s.Members[0]), onA.Local(s.Members[1]))
	}
	resp, err := onA.Post(ctx, s.Members[0], "/recovery", body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if _, reqs := fake.calls(); resp.StatusCode != http.StatusAccepted || len(reqs) != 1 {
		t.Errorf("a's POST through its socket: %s %s, %d requests; want 202", resp.Status, b, len(reqs))
	}
	if _, err := onA.Post(ctx, s.Members[1], "/recovery", body); err == nil || !strings.Contains(err.Error(), "b's agent is on another host and the spec sets no agent.recoveryAddr") {
		t.Errorf("b's POST from a: %v, want refused here", err)
	}
	if u := onA.URL(s.Members[1], "/recovery"); u != "http://127.0.0.2:1/recovery" {
		t.Errorf("b's URL from a: %s, want its agent.addr", u)
	}

	bed, err := NewControl(s, "not-a-member")
	if err != nil {
		t.Fatal(err)
	}
	if !bed.Local(s.Members[0]) || bed.Local(s.Members[1]) {
		t.Errorf("on a test bed: local a %v, b %v; want a (its socket is here), not b", bed.Local(s.Members[0]), bed.Local(s.Members[1]))
	}
	if err := ServeControl(ctx, zap.NewNop(), SocketPath(dirB), ControlHandler(agentSource{fake}, nil)); err != nil {
		t.Fatal(err)
	}
	if !onA.Local(s.Members[1]) {
		t.Error("on a: b's socket is here too, but b is not local")
	}
	resp, err = bed.Get(ctx, s.Members[0], "/status")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /status through a's socket: %s", resp.Status)
	}
}
