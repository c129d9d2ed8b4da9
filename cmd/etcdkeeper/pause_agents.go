package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// agentAnswer is one agent's answer to POST /pause or /resume.
type agentAnswer struct {
	Name string
	// Was: the pause the agent kept (resume), nil when none.
	Was *model.Pause
	Err error
}

// postAgents POSTs body to path on every member's agent at once (this
// host's through its control socket, the others on agent.recoveryAddr),
// each call within agentCallTimeout.
func postAgents(ctx context.Context, s *spec.Spec, path string, body []byte) []agentAnswer {
	out := make([]agentAnswer, len(s.Members))
	ctl, err := httpapi.NewControl(s, "")
	if err != nil {
		for i, m := range s.Members {
			out[i] = agentAnswer{Name: m.Name, Err: fmt.Errorf("reaching the agents: %w", err)}
		}
		return out
	}
	var wg sync.WaitGroup
	for i, m := range s.Members {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
			defer cancel()
			out[i] = postAgent(cctx, ctl, m, path, body)
		})
	}
	wg.Wait()
	return out
}

const agentCallTimeout = 10 * time.Second

func postAgent(ctx context.Context, ctl *httpapi.Control, m spec.Member, path string, body []byte) agentAnswer {
	a := agentAnswer{Name: m.Name}
	resp, err := ctl.Post(ctx, m, path, body)
	if err != nil {
		a.Err = fmt.Errorf("%s: %w", ctl.URL(m, path), err)
		return a
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		a.Err = fmt.Errorf("%s: %s: %s", ctl.URL(m, path), resp.Status, b)
		return a
	}
	if path == "/resume" {
		if err := json.Unmarshal(b, &a.Was); err != nil {
			a.Err = fmt.Errorf("%s: %w", ctl.URL(m, path), err)
		}
	}
	return a
}

// split names the agents that answered and says why the others did not.
func split(as []agentAnswer) (reached, missed []string) {
	for _, a := range as {
		if a.Err != nil {
			missed = append(missed, fmt.Sprintf("%s (%v)", a.Name, a.Err))
		} else {
			reached = append(reached, a.Name)
		}
	}
	return reached, missed
}
