package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// agents reaches each member's agent (GET and POST /recovery):
// recovery.Agents over the CLI's transport (httpapi.Control: this host's
// agent through its control socket, the others on agent.recoveryAddr or
// agent.addr). All of recover's calls to the agents are here; what they
// mean is decided in internal/recovery.
type agents struct {
	s    *spec.Spec
	self spec.Member
	// selfListed: --name (or the host name) is a member of the spec.
	selfListed bool
	ctl        *httpapi.Control
}

var _ recovery.Agents = (*agents)(nil)

func newAgents(s *spec.Spec, name string) (*agents, error) {
	ctl, err := httpapi.NewControl(s, name)
	if err != nil {
		return nil, fmt.Errorf("reaching the agents: %w", err)
	}
	self, ok := ctl.Self()
	return &agents{s: s, self: self, selfListed: ok, ctl: ctl}, nil
}

// endpoint is where member m's agent serves /recovery, for messages.
func (ag *agents) endpoint(m spec.Member) string { return ag.ctl.URL(m, "/recovery") }

// inspectAll asks every member's agent at once, each call within d.
func (ag *agents) inspectAll(ctx context.Context, d time.Duration) []recovery.Inspection {
	out := make([]recovery.Inspection, len(ag.s.Members))
	var wg sync.WaitGroup
	for i, m := range ag.s.Members {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			out[i] = ag.Inspect(cctx, m.Name)
		})
	}
	wg.Wait()
	return out
}

// Inspect is GET /recovery on member name's agent.
func (ag *agents) Inspect(ctx context.Context, name string) recovery.Inspection {
	bad := func(err error) recovery.Inspection { return recovery.Inspection{Name: name, Error: err.Error()} }
	m, ok := ag.s.Lookup(name)
	if !ok {
		return bad(fmt.Errorf("%s is not in the spec", name))
	}
	resp, err := ag.ctl.Get(ctx, m, "/recovery")
	if err != nil {
		return bad(err)
	}
	defer resp.Body.Close()
	var in recovery.Inspection
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&in); err != nil {
		return bad(fmt.Errorf("%s: %s: %w", ag.endpoint(m), resp.Status, err))
	}
	if in.Name != m.Name {
		// agent.addr on loopback reaches this host's own agent.
		return bad(fmt.Errorf("%s answers for %s, not %s", ag.endpoint(m), in.Name, m.Name))
	}
	in.Reachable = true
	return in
}

// Post is POST /recovery on member name's agent. An answer that says the
// agent did not take the request (a 4xx with its reason) is a
// *recovery.RefusedError; any other failure may hide a request taken.
func (ag *agents) Post(ctx context.Context, name string, r recovery.Request) (recovery.Journal, error) {
	m, ok := ag.s.Lookup(name)
	if !ok {
		return recovery.Journal{}, &recovery.RefusedError{Reason: name + " is not in the spec"}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return recovery.Journal{}, fmt.Errorf("encoding the request: %w", err)
	}
	resp, err := ag.ctl.Post(ctx, m, "/recovery", body)
	if err != nil {
		return recovery.Journal{}, fmt.Errorf("%s: %w", ag.endpoint(m), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusAccepted {
		var e struct{ Error string }
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && json.Unmarshal(b, &e) == nil && e.Error != "" {
			return recovery.Journal{}, &recovery.RefusedError{Reason: e.Error}
		}
		return recovery.Journal{}, fmt.Errorf("%s: %s", ag.endpoint(m), resp.Status)
	}
	var j recovery.Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return recovery.Journal{}, fmt.Errorf("%s: %w", ag.endpoint(m), err)
	}
	if j.ID != r.ID {
		return recovery.Journal{}, errors.New(ag.endpoint(m) + ": the answer is about recovery " + j.ID + ", not " + r.ID)
	}
	return j, nil
}
