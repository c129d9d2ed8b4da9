package testbed

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MemberInfo is one Member as the cluster lists it, with its health.
type MemberInfo struct {
	ID        uint64
	Name      string
	IsLearner bool
	Healthy   bool
	// Started: the member published its client URLs (an initial-cluster
	// member that never started has a name but no client URL).
	Started bool
}

// members lists the cluster's members through the given client and checks
// each one's status.
func (c *Cluster) MemberList(cli *clientv3.Client) ([]MemberInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []MemberInfo
	for _, m := range resp.Members {
		mi := MemberInfo{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner, Started: len(m.ClientURLs) > 0}
		if len(m.ClientURLs) > 0 {
			st, err := cli.Status(ctx, m.ClientURLs[0])
			// The endpoint must answer as this very member: a stale entry
			// shares its URLs with the host's new member.
			mi.Healthy = err == nil && st.Header.MemberId == m.ID && st.Leader != 0 && len(st.Errors) == 0
		}
		out = append(out, mi)
	}
	return out, nil
}

// WaitVoters waits until the cluster consists of exactly the named
// members, all healthy voters, and returns their IDs by name.
func (c *Cluster) WaitVoters(d time.Duration, names ...string) map[string]uint64 {
	c.t.Helper()
	cli := c.Client(names...)
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		ms, err := c.MemberList(cli)
		if err != nil {
			last = err.Error()
		} else if ids, why := exactVoters(ms, names); why == "" {
			return ids
		} else {
			last = why
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.t.Fatalf("cluster did not converge to healthy voters %v within %s: %s", names, d, last)
	return nil
}

func exactVoters(ms []MemberInfo, names []string) (map[string]uint64, string) {
	ids := map[string]uint64{}
	for _, m := range ms {
		switch {
		case m.Name == "" || !m.Started:
			return nil, fmt.Sprintf("unstarted Member %x", m.ID)
		case m.IsLearner:
			return nil, fmt.Sprintf("learner %s (%x)", m.Name, m.ID)
		case !slices.Contains(names, m.Name):
			return nil, fmt.Sprintf("extra Member %s", m.Name)
		case !m.Healthy:
			return nil, fmt.Sprintf("Member %s unhealthy", m.Name)
		}
		ids[m.Name] = m.ID
	}
	if len(ids) != len(names) {
		return nil, fmt.Sprintf("members %v, want %v", keys(ids), names)
	}
	return ids, ""
}

func keys(m map[string]uint64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// PeerURLs maps each started member's name to its first peer URL.
func (c *Cluster) PeerURLs(cli *clientv3.Client) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range resp.Members {
		if len(m.PeerURLs) > 0 {
			out[m.Name] = m.PeerURLs[0]
		}
	}
	return out, nil
}
