package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Control is how the CLI (recover, status) reaches the agents:
//   - this host's agent through its control socket, for reads and
//     changes (root or the agent's user only);
//   - another host's agent on agent.recoveryAddr (mutual TLS with this
//     host's peer certificate, unless agent.recoveryInsecure), for reads
//     and changes;
//   - without agent.recoveryAddr, another agent's agent.addr, for reads
//     only.
//
// This host's agents are the one named --name (default: the host name),
// and any other whose control socket is found in its state dir here (a
// test bed: several agents on one host; on a real host the other members'
// state dirs are not there).
type Control struct {
	s          *spec.Spec
	self       spec.Member
	selfListed bool
	tcp        *http.Client
	// scheme is https when agent.recoveryAddr uses the peer TLS.
	scheme string

	mu   sync.Mutex
	unix map[string]*http.Client
}

// callTimeout bounds one call to an agent.
const callTimeout = 20 * time.Second

// NewControl prepares the calls of the CLI on the host whose member is
// name (empty: the host name).
func NewControl(s *spec.Spec, name string) (*Control, error) {
	var self spec.Member
	var ok bool
	if name == "" {
		host, _ := os.Hostname()
		self, ok = s.ForHost(host) // node1 on node1.example.com too
		if !ok {
			name = host
		}
	} else {
		self, ok = s.Lookup(name)
	}
	if !ok {
		// Only to choose a peer certificate to call the others with.
		self = spec.Member{Name: name, TLS: s.Members[0].TLS}
	}
	c := &Control{s: s, self: self, selfListed: ok, scheme: "http", unix: map[string]*http.Client{}}
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}
	if s.Agent.RecoveryAddr != "" {
		cfg, err := RecoveryClientTLS(self.TLS.Peer)
		if err != nil {
			return nil, fmt.Errorf("the peer certificate to call the other agents with: %w", err)
		}
		if cfg != nil {
			tr.TLSClientConfig, c.scheme = cfg, "https"
		}
	}
	c.tcp = &http.Client{Transport: tr, Timeout: callTimeout}
	return c, nil
}

// Self is this host's member (selfListed: the spec lists it).
func (c *Control) Self() (m spec.Member, selfListed bool) { return c.self, c.selfListed }

// Local: m's agent runs on this host, and is reached through its control
// socket.
func (c *Control) Local(m spec.Member) bool {
	if c.selfListed && m.Name == c.self.Name {
		return true
	}
	fi, err := os.Stat(SocketPath(m.StateDir))
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// URL is where m's agent serves path, for messages and remote calls.
func (c *Control) URL(m spec.Member, path string) string {
	if c.Local(m) {
		return "unix:" + SocketPath(m.StateDir) + ":" + path
	}
	return c.remoteURL(m, path)
}

// remoteURL is m's agent.recoveryAddr (its peer URL's host when the
// address binds every IP), else its agent.addr.
func (c *Control) remoteURL(m spec.Member, path string) string {
	if ra := c.s.Agent.RecoveryAddr; ra != "" {
		host, port, _ := net.SplitHostPort(ra)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if u, err := url.Parse(m.PeerURLs[0]); err == nil {
				host = u.Hostname()
			}
		}
		return c.scheme + "://" + net.JoinHostPort(host, port) + path
	}
	return "http://" + m.AgentAddr + path
}

// Get reads path from m's agent: through its socket when it is local and
// the socket lets this user in, else over TCP.
func (c *Control) Get(ctx context.Context, m spec.Member, path string) (*http.Response, error) {
	if c.Local(m) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.unixClient(m).Do(req)
		if err == nil {
			return resp, nil
		}
		// Not root nor the agent's user (status, run by anyone): the
		// reads are served on TCP as well.
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.remoteURL(m, path), nil)
	if err != nil {
		return nil, err
	}
	return c.tcp.Do(req)
}

// Post asks m's agent for a change: through its socket when it is local,
// else on agent.recoveryAddr. Without agent.recoveryAddr another host's
// agent takes no change from here.
func (c *Control) Post(ctx context.Context, m spec.Member, path string, body []byte) (*http.Response, error) {
	u, hc := "http://agent"+path, (*http.Client)(nil)
	switch {
	case c.Local(m):
		hc = c.unixClient(m)
	case c.s.Agent.RecoveryAddr != "":
		u, hc = c.remoteURL(m, path), c.tcp
	default:
		return nil, fmt.Errorf("%s's agent is on another host and the spec sets no agent.recoveryAddr: it takes changes only from its own host (run this there), or set agent.recoveryAddr", m.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil && c.Local(m) {
		return nil, localError(m, err)
	}
	return resp, err
}

// localError says why this host's agent could not be reached through its
// socket.
func localError(m spec.Member, err error) error {
	sock := SocketPath(m.StateDir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s's control socket %s: %w: run this as root or as the agent's user", m.Name, sock, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s's control socket %s: %w: is its agent running on this host?", m.Name, sock, err)
	}
	return fmt.Errorf("%s's control socket %s: %w", m.Name, sock, err)
}

// unixClient is the client that dials m's control socket.
func (c *Control) unixClient(m spec.Member) *http.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc := c.unix[m.Name]; hc != nil {
		return hc
	}
	sock := SocketPath(m.StateDir)
	d := &net.Dialer{Timeout: 3 * time.Second}
	hc := &http.Client{Timeout: callTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
	}}
	c.unix[m.Name] = hc
	return hc
}
