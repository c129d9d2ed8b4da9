package main

import (
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// monitor samples the cluster every period into a timeline, the observed
// truth the agents' logged decisions are checked against. Each sample is
// one observation of the test bed's observer (testbed.Observe), which
// shares no code with the agents and holds the one health rule.
type monitor struct {
	cli    *clientv3.Client
	period time.Duration
	// via, when set, are clients of one member each: the member list is
	// asked through one of them, and through the next one when it got no
	// answer, so that a member cut off does not blind the monitor (a
	// client of all members keeps sending to a member that stopped
	// answering until its keepalive gives up).
	via []*clientv3.Client
	cur int

	mu       sync.Mutex
	timeline []testbed.Observation
	stop     chan struct{}
	done     chan struct{}
}

// newMonitor samples through cli; the caller closes it after halt.
func newMonitor(cli *clientv3.Client, period time.Duration) *monitor {
	return &monitor{cli: cli, period: period, stop: make(chan struct{}), done: make(chan struct{})}
}

func (m *monitor) run() {
	defer close(m.done)
	for {
		s := m.observe()
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

func (m *monitor) observe() testbed.Observation {
	if len(m.via) == 0 {
		return testbed.Observe(m.cli)
	}
	s := testbed.Observe(m.via[m.cur])
	if s.Err != nil {
		m.cur = (m.cur + 1) % len(m.via)
		if again := testbed.Observe(m.via[m.cur]); again.Err == nil {
			again.Start = s.Start // the sample covers both tries
			return again
		}
	}
	return s
}

func (m *monitor) halt() {
	close(m.stop)
	<-m.done
}

// latest is the last complete sample.
func (m *monitor) latest() (testbed.Observation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timeline) == 0 {
		return testbed.Observation{}, false
	}
	return m.timeline[len(m.timeline)-1], true
}

// firstAfter is the first answered sample that began after t.
func (m *monitor) firstAfter(t time.Time) (testbed.Observation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.timeline {
		if s.Start.After(t) && s.Err == nil {
			return s, true
		}
	}
	return testbed.Observation{}, false
}

// lastBefore is the last answered sample that ended before t.
func (m *monitor) lastBefore(t time.Time) (testbed.Observation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.timeline) - 1; i >= 0; i-- {
		s := m.timeline[i]
		if s.End.Before(t) && s.Err == nil {
			return s, true
		}
	}
	return testbed.Observation{}, false
}

func (m *monitor) samples() []testbed.Observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]testbed.Observation(nil), m.timeline...)
}
