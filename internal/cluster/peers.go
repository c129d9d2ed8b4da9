package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// PeerMembers asks a member's peer port for the member list. etcd serves
// it to peers from the moment its server is built, before it has a
// leader or serves clients, so it tells whether a cluster exists even
// while that cluster is restarting. It returns each member's peer URLs
// and the cluster ID the peer reports.
func PeerMembers(ctx context.Context, peerURL string, m spec.Member) ([][]string, string, error) {
	ms, cid, err := PeerMemberList(ctx, peerURL, m)
	if err != nil {
		return nil, "", err
	}
	out := make([][]string, 0, len(ms))
	for _, x := range ms {
		out = append(out, x.PeerURLs)
	}
	return out, cid, nil
}

// PeerMember is one entry of a peer port's /members: the member as that
// member's own etcd knows it (etcd's membership.Member).
type PeerMember struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	IsLearner  bool     `json:"isLearner"`
	Name       string   `json:"name"`
	ClientURLs []string `json:"clientURLs"`
}

// PeerMemberList is the member list as the etcd behind peerURL knows it
// (GET /members on its peer port, with m's peer TLS), and the cluster ID
// it reports.
func PeerMemberList(ctx context.Context, peerURL string, m spec.Member) ([]PeerMember, string, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	tlsCfg, err := TLSConfig(spec.TLSClient{CertFile: m.TLS.Peer.CertFile, KeyFile: m.TLS.Peer.KeyFile, TrustedCAFile: m.TLS.Peer.TrustedCAFile})
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(peerURL, "/")+"/members", nil)
	if err != nil {
		return nil, "", fmt.Errorf("peer members request: %w", err)
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("members from %s: %w", peerURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("members from %s: %s", peerURL, resp.Status)
	}
	var ms []PeerMember
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		return nil, "", fmt.Errorf("members from %s: %w", peerURL, err)
	}
	return ms, resp.Header.Get("X-Etcd-Cluster-ID"), nil
}

// ClusterWithout returns evidence that a peer already belongs to a
// cluster that does not list self (it exists, and self was never added):
// then self must wait and join it through the API, never form a new one.
// "" when no peer answers or every answering peer lists self (a cluster
// bootstrapping from the same initial member list).
func ClusterWithout(ctx context.Context, self spec.Member, peers []spec.Member) string {
	for _, p := range peers {
		for _, u := range p.PeerURLs {
			ms, id, err := PeerMembers(ctx, u, self)
			if err != nil {
				continue
			}
			listed := slices.ContainsFunc(ms, func(urls []string) bool {
				return slices.ContainsFunc(self.PeerURLs, func(s string) bool { return slices.Contains(urls, s) })
			})
			if !listed {
				return fmt.Sprintf("%s's peer port reports cluster %s with %d members, not including this host", p.Name, id, len(ms))
			}
		}
	}
	return ""
}

// AnyListening reports whether any of the URLs' host:port accepts a TCP
// connection within a short deadline. When none does (connection refused
// everywhere), nobody is there, and the slower etcd calls, which retry
// until their deadline, can be skipped.
func AnyListening(ctx context.Context, urls []string) bool {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	found := make(chan bool, len(urls))
	for _, raw := range urls {
		go func(raw string) {
			u, err := url.Parse(raw)
			if err != nil {
				found <- false
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", u.Host)
			if err == nil {
				c.Close()
			}
			found <- err == nil
		}(raw)
	}
	for range urls {
		if <-found {
			return true
		}
	}
	return false
}
