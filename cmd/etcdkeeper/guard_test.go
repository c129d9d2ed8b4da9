package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// fakeAgent serves the control socket of a member whose state dir is
// dir: the first `drop` connections are closed unanswered (an agent
// restarting, or not answering in time), then each call is answered by
// answer. It counts the calls that reached answer.
func fakeAgent(t *testing.T, dir string, drop int, answer http.HandlerFunc) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("unix", httpapi.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	var dropped atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dropped.Add(1) <= int64(drop) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		seen.Add(1)
		answer(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return &seen
}

func testTurnClient(t *testing.T, dir string) (*turnClient, *bytes.Buffer) {
	t.Helper()
	s := &spec.Spec{Cluster: spec.Cluster{Name: "c1"}, Members: []spec.Member{{Name: "node1", StateDir: dir}}}
	ctl, err := httpapi.NewControl(s, "node1")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := ctl.Self()
	var out bytes.Buffer
	return &turnClient{ctl: ctl, self: self, out: &out}, &out
}

// TestGuardAsksAgain: the guard's "work done" reaches an agent that did
// not answer its first two calls (it was restarting: a package upgrade in
// the turn), and the guard says it asks again; an agent's refusal is not
// asked again.
func TestGuardAsksAgain(t *testing.T) {
	dir, err := os.MkdirTemp("", "guard-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	seen := fakeAgent(t, dir, 2, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(model.TurnProgress{ID: "w1", Phase: model.TurnEnded, Text: "ended"})
	})
	tc, out := testTurnClient(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.returnTurn(ctx, httpapi.TurnID{ID: "w1"}); err != nil {
		t.Fatalf("returnTurn through an agent that missed two calls: %v\n%s", err, out)
	}
	if seen.Load() != 1 {
		t.Errorf("the agent answered %d calls, want 1", seen.Load())
	}
	if !strings.Contains(out.String(), "asking again") {
		t.Errorf("the guard did not say it asks again:\n%s", out)
	}

	refusing := filepath.Join(dir, "refusing")
	if err := os.Mkdir(refusing, 0o700); err != nil {
		t.Fatal(err)
	}
	asked := fakeAgent(t, refusing, 0, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "a host turn is already wished on this host"})
	})
	tc, out = testTurnClient(t, refusing)
	_, err = tc.waitGranted(ctx, model.TurnWish{ID: "w2", Kind: model.TurnGuard}, 0)
	if err == nil || !strings.Contains(err.Error(), "already wished") {
		t.Fatalf("waitGranted refused by the agent: %v, want its refusal", err)
	}
	if asked.Load() != 1 {
		t.Errorf("a refusal was asked %d times, want once\n%s", asked.Load(), out)
	}
}

// TestMaintenanceEndRefusedUnderARunningGuard: maintenance end does not
// end a turn a running guard holds: the agent refuses (409) and the
// command says so, names the guard, says that --force ends it anyway,
// and exits 2; with --force it asks for it and ends it.
func TestMaintenanceEndRefusedUnderARunningGuard(t *testing.T) {
	const held = "a running guard holds this host's turn: guard: systemctl reboot (pid 4242, by root@node1, asked 10:02:11): it gives the turn back itself once its command has returned"
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			dir := shortTempDir(t)
			path, stateDir := writeTurnSpec(t, dir)
			var forced atomic.Bool
			fakeAgent(t, stateDir, 0, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/turn/done" {
					var done httpapi.TurnID
					_ = json.NewDecoder(r.Body).Decode(&done)
					if !done.Force {
						w.WriteHeader(http.StatusConflict)
						_ = json.NewEncoder(w).Encode(map[string]string{"error": held})
						return
					}
					forced.Store(true)
				}
				_ = json.NewEncoder(w).Encode(model.TurnProgress{ID: "w1", Phase: model.TurnEnded, Text: "ended"})
			})
			args := []string{"maintenance", "end", "--config", path, "--name", "node1"}
			if force {
				args = append(args, "--force")
			}
			root := rootCmd()
			var out bytes.Buffer
			root.SetArgs(args)
			root.SetOut(&out)
			root.SetErr(&out)
			err := root.Execute()
			if force {
				if err != nil || !forced.Load() {
					t.Fatalf("maintenance end --force: %v (force asked: %v)\n%s", err, forced.Load(), &out)
				}
				return
			}
			if code := exitCode(err); err == nil || code != 2 {
				t.Fatalf("maintenance end under a running guard: %v (exit %d), want refused with exit 2\n%s", err, code, &out)
			}
			for _, want := range []string{"holds this host's turn: guard: systemctl reboot (pid 4242", "maintenance end --force ends it anyway"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the refusal does not say %q:\n%s", want, &out)
				}
			}
		})
	}
}
