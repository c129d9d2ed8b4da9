package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// member is one member as the cluster lists it, with the answer of its
// own status endpoint.
type member struct {
	ID      uint64
	Name    string
	Learner bool
	Healthy bool
	Leader  uint64
	DBSize  int64
}

// probe lists the members through cli and asks each for its status on its
// own endpoint, in parallel, each call bounded: a dead member costs one
// short timeout. The same check for the agents' clusters and the plain
// ones, so that both are timed to the same end.
func probe(cli *clientv3.Client) ([]member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]member, len(resp.Members))
	var wg sync.WaitGroup
	for i, m := range resp.Members {
		out[i] = member{ID: m.ID, Name: m.Name, Learner: m.IsLearner}
		if len(m.ClientURLs) == 0 {
			out[i].Name = ""
			continue
		}
		wg.Add(1)
		go func(mm *member, ep string) {
			defer wg.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer scancel()
			st, err := statusOf(sctx, ep)
			// The endpoint must answer as this very member: a stale entry
			// shares its URLs with the host's new member.
			mm.Healthy = err == nil && st.Header.MemberId == mm.ID && st.Leader != 0 && len(st.Errors) == 0
			if err == nil {
				mm.Leader, mm.DBSize = st.Leader, st.DbSize
			}
		}(&out[i], m.ClientURLs[0])
	}
	wg.Wait()
	return out, nil
}

// statusOf asks one endpoint for its status over a fresh connection, so
// that a restarted member is seen at once (no reconnect backoff).
func statusOf(ctx context.Context, ep string) (*pb.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 500 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
}

// exactly reports "" when the members are exactly names, every one a
// healthy voter, or why not.
func exactly(ms []member, names []string) string {
	have := map[string]bool{}
	for _, m := range ms {
		switch {
		case m.Name == "":
			return fmt.Sprintf("unstarted member %x", m.ID)
		case m.Learner:
			return "learner " + m.Name
		case !m.Healthy:
			return m.Name + " unhealthy"
		case !slices.Contains(names, m.Name):
			return "extra member " + m.Name
		}
		have[m.Name] = true
	}
	if len(have) != len(names) {
		var got []string
		for n := range have {
			got = append(got, n)
		}
		sort.Strings(got)
		return fmt.Sprintf("members %s, want %s", strings.Join(got, ","), strings.Join(names, ","))
	}
	return ""
}

func idOf(ms []member, name string) uint64 {
	for _, m := range ms {
		if m.Name == name {
			return m.ID
		}
	}
	return 0
}

func leaderOf(ms []member) uint64 {
	for _, m := range ms {
		if m.Healthy && m.Leader != 0 {
			return m.Leader
		}
	}
	return 0
}

// waitFor polls probe every pollEvery until ok says "" and returns the
// time at which it did, and the members then.
func waitFor(cli *clientv3.Client, d time.Duration, what string, ok func([]member) string) (time.Time, []member, error) {
	deadline := time.Now().Add(d)
	why := "no answer yet"
	for time.Now().Before(deadline) {
		ms, err := probe(cli)
		now := time.Now()
		if err != nil {
			why = err.Error()
		} else if why = ok(ms); why == "" {
			return now, ms, nil
		}
		time.Sleep(pollEvery)
	}
	return time.Time{}, nil, fmt.Errorf("%s: not within %s: %s", what, d, why)
}

// pollEvery is the resolution of every timing in the table.
const pollEvery = 100 * time.Millisecond
