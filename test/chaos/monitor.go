package main

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// sample is the cluster as the monitor saw it once: the member list and
// each member's own answer.
type sample struct {
	Start, End time.Time
	Err        string
	Members    []memberState
}

type memberState struct {
	ID      uint64
	Name    string // "" while unstarted
	Learner bool
	Healthy bool
}

func (s sample) voters() []memberState {
	var out []memberState
	for _, m := range s.Members {
		if !m.Learner {
			out = append(out, m)
		}
	}
	return out
}

func (s sample) byName(name string) (memberState, bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m, true
		}
	}
	return memberState{}, false
}

func (s sample) byID(id uint64) (memberState, bool) {
	for _, m := range s.Members {
		if m.ID == id {
			return m, true
		}
	}
	return memberState{}, false
}

// healthyVoter reports whether member name is a healthy voter in s.
func (s sample) healthyVoter(name string) bool {
	m, ok := s.byName(name)
	return ok && m.Healthy && !m.Learner
}

// monitor samples the cluster's health every period into a timeline, the
// observed truth the agents' logged decisions are checked against.
type monitor struct {
	cli    *clientv3.Client
	period time.Duration

	mu       sync.Mutex
	timeline []sample
	stop     chan struct{}
	done     chan struct{}
}

func newMonitor(endpoints []string, period time.Duration) (*monitor, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	return &monitor{cli: cli, period: period, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

func (m *monitor) run() {
	defer close(m.done)
	for {
		s := observe(m.cli)
		m.mu.Lock()
		m.timeline = append(m.timeline, s)
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-time.After(m.period):
		}
	}
}

func (m *monitor) halt() {
	close(m.stop)
	<-m.done
	m.cli.Close()
}

// latest is the last complete sample.
func (m *monitor) latest() (sample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timeline) == 0 {
		return sample{}, false
	}
	return m.timeline[len(m.timeline)-1], true
}

// since is the first successful sample that began after t.
func (m *monitor) firstAfter(t time.Time) (sample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.timeline {
		if s.Start.After(t) && s.Err == "" {
			return s, true
		}
	}
	return sample{}, false
}

// before is the last successful sample that ended before t.
func (m *monitor) lastBefore(t time.Time) (sample, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.timeline) - 1; i >= 0; i-- {
		s := m.timeline[i]
		if s.End.Before(t) && s.Err == "" {
			return s, true
		}
	}
	return sample{}, false
}

func (m *monitor) samples() []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sample(nil), m.timeline...)
}

// observe lists the members and asks each for its status on its own
// endpoint, in parallel, each call bounded.
func observe(cli *clientv3.Client) sample {
	s := sample{Start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	resp, err := cli.MemberList(ctx)
	cancel()
	if err != nil {
		s.Err, s.End = err.Error(), time.Now()
		return s
	}
	s.Members = make([]memberState, len(resp.Members))
	var wg sync.WaitGroup
	for i, mb := range resp.Members {
		s.Members[i] = memberState{ID: mb.ID, Name: mb.Name, Learner: mb.IsLearner}
		if len(mb.ClientURLs) == 0 {
			s.Members[i].Name = ""
			continue
		}
		wg.Add(1)
		go func(ms *memberState, ep string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			st, err := statusOf(ctx, ep)
			ms.Healthy = err == nil && st.Header.MemberId == ms.ID && st.Leader != 0 && len(st.Errors) == 0
		}(&s.Members[i], mb.ClientURLs[0])
	}
	wg.Wait()
	s.End = time.Now()
	return s
}

// statusOf asks one endpoint for its status over a fresh connection, so
// that a restarted member is seen at once.
func statusOf(ctx context.Context, ep string) (*pb.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 500 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
}
