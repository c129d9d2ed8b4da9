package main

import (
	"context"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/etcdkeeper/etcdkeeper/internal/agent"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// memberWatch follows every member while a procedure runs: its gRPC
// health (grpc.health.v1 Watch: NOT_SERVING while it defragments, with
// StopGRPCServiceOnDefrag on) and its member/snap dir's byte count,
// sampled every snapEvery.
type memberWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	status map[string][]statusAt
	snap   map[string][]bytesAt
}

type statusAt struct {
	at      time.Time
	serving bool
}

type bytesAt struct {
	at time.Time
	n  int64
}

const snapEvery = 50 * time.Millisecond

func watchMembers(c *testbed.Cluster) *memberWatch {
	ctx, cancel := context.WithCancel(context.Background())
	mw := &memberWatch{cancel: cancel, status: map[string][]statusAt{}, snap: map[string][]bytesAt{}}
	for _, m := range c.Members {
		mw.wg.Add(2)
		go mw.health(ctx, m.Name, m.ClientURL())
		go mw.sample(ctx, m.Name, c.DataDir(m.Name))
	}
	return mw
}

func (mw *memberWatch) Stop() {
	mw.cancel()
	mw.wg.Wait()
}

// health watches one member's health until ctx ends, again after a
// broken stream.
func (mw *memberWatch) health(ctx context.Context, name, endpoint string) {
	defer mw.wg.Done()
	u, err := url.Parse(endpoint)
	if err != nil {
		return
	}
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer conn.Close()
	for ctx.Err() == nil {
		stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		for err == nil {
			var resp *healthpb.HealthCheckResponse
			if resp, err = stream.Recv(); err == nil {
				mw.mu.Lock()
				mw.status[name] = append(mw.status[name], statusAt{at: time.Now(), serving: resp.Status == healthpb.HealthCheckResponse_SERVING})
				mw.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (mw *memberWatch) sample(ctx context.Context, name, dir string) {
	defer mw.wg.Done()
	tick := time.NewTicker(snapEvery)
	defer tick.Stop()
	for {
		n := agent.SnapBytes(dir)
		mw.mu.Lock()
		mw.snap[name] = append(mw.snap[name], bytesAt{at: time.Now(), n: n})
		mw.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serving says whether every member's health was seen SERVING last.
func (mw *memberWatch) serving(names []string) bool {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	for _, n := range names {
		s := mw.status[n]
		if len(s) == 0 || !s[len(s)-1].serving {
			return false
		}
	}
	return true
}

type span struct{ from, to time.Time }

// notServing are the spans in which name's health said NOT_SERVING; one
// still open at the end ends at end.
func (mw *memberWatch) notServing(name string, end time.Time) []span {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	var out []span
	var open *time.Time
	for _, s := range mw.status[name] {
		switch {
		case !s.serving && open == nil:
			at := s.at
			open = &at
		case s.serving && open != nil:
			out = append(out, span{*open, s.at})
			open = nil
		}
	}
	if open != nil {
		out = append(out, span{*open, end})
	}
	return out
}

// defragging says whether name said NOT_SERVING at any time in [from, to].
func (mw *memberWatch) defragging(name string, from, to time.Time) bool {
	for _, s := range mw.notServing(name, to) {
		if !s.to.Before(from) && !s.from.After(to) {
			return true
		}
	}
	return false
}

// unchanged is the longest time within the spans during which name's
// snap dir byte count did not change (to snapEvery's resolution).
func (mw *memberWatch) unchanged(name string, spans []span) time.Duration {
	mw.mu.Lock()
	samples := append([]bytesAt(nil), mw.snap[name]...)
	mw.mu.Unlock()
	var worst time.Duration
	for _, sp := range spans {
		prev, last, known := sp.from, int64(0), false
		for _, s := range samples {
			if s.at.After(sp.to) {
				break
			}
			if !s.at.After(sp.from) {
				last, known = s.n, true
				continue
			}
			if known && s.n != last {
				worst = max(worst, s.at.Sub(prev))
				prev = s.at
			}
			last, known = s.n, true
		}
		worst = max(worst, sp.to.Sub(prev))
	}
	return worst
}
