package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// agents reaches each member's agent endpoint (GET and POST /recovery):
// recovery.Agents over HTTP. All of recover's calls to the agents are
// here; what they mean is decided in internal/recovery.
type agents struct {
	s    *spec.Spec
	self spec.Member
	// selfListed: --name (or the host name) is a member of the spec.
	selfListed bool
	http       *http.Client
	// scheme is https when the recovery listener uses the peer TLS.
	scheme string
}

var _ recovery.Agents = (*agents)(nil)

func newAgents(s *spec.Spec, name string) (*agents, error) {
	if name == "" {
		name, _ = os.Hostname()
	}
	self, ok := s.Lookup(name)
	if !ok {
		// Only to choose a peer certificate to call the others with.
		self = spec.Member{Name: name, TLS: s.Members[0].TLS}
	}
	ag := &agents{s: s, self: self, selfListed: ok, scheme: "http"}
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}
	if s.Agent.RecoveryAddr != "" {
		cfg, err := httpapi.RecoveryClientTLS(self.TLS.Peer)
		if err != nil {
			return nil, fmt.Errorf("the peer certificate to call the other agents with: %w", err)
		}
		if cfg != nil {
			tr.TLSClientConfig, ag.scheme = cfg, "https"
		}
	}
	// Each call's deadline is its context's (recovery.Deadlines.Call).
	ag.http = &http.Client{Transport: tr}
	return ag, nil
}

// endpoint is where member m's agent serves /recovery: agent.recoveryAddr
// on m's host (its peer URL's host when the address binds every IP), else
// m's agent.addr.
func (ag *agents) endpoint(m spec.Member) string {
	if ra := ag.s.Agent.RecoveryAddr; ra != "" {
		host, port, _ := net.SplitHostPort(ra)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if u, err := url.Parse(m.PeerURLs[0]); err == nil {
				host = u.Hostname()
			}
		}
		return ag.scheme + "://" + net.JoinHostPort(host, port) + "/recovery"
	}
	return "http://" + m.AgentAddr + "/recovery"
}

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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ag.endpoint(m), nil)
	if err != nil {
		return bad(err)
	}
	resp, err := ag.http.Do(req)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ag.endpoint(m), bytes.NewReader(body))
	if err != nil {
		return recovery.Journal{}, fmt.Errorf("request to %s: %w", name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ag.http.Do(req)
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
