package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// plainArgs are the flags the agent would give member m (see
// internal/etcdproc.Flags and the test bed's spec), written out by hand
// the way an operator's script has them.
func plainArgs(c *testbed.Cluster, m testbed.Member, state, initialCluster string) []string {
	return []string{"etcd",
		"--name=" + m.Name,
		"--data-dir=" + c.DataDir(m.Name),
		"--listen-peer-urls=" + m.PeerURL(),
		"--listen-client-urls=" + m.ClientURL(),
		"--initial-advertise-peer-urls=" + m.PeerURL(),
		"--advertise-client-urls=" + m.ClientURL(),
		"--initial-cluster-token=itest",
		"--initial-cluster-state=" + state,
		"--initial-cluster=" + initialCluster,
		"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true",
		"--log-level=warn", "--logger=zap", "--log-outputs=stderr",
	}
}

func staticInitialCluster(c *testbed.Cluster) string {
	var parts []string
	for _, m := range c.Members {
		parts = append(parts, m.Name+"="+m.PeerURL())
	}
	return strings.Join(parts, ",")
}

// startPlain starts etcd directly, as an operator's script does:
// `etcdkeeper etcd --name ... --initial-cluster ...`, no agent.
func startPlain(c *testbed.Cluster, m testbed.Member, state, initialCluster string) (*testbed.Process, error) {
	if err := os.MkdirAll(c.DataDir(m.Name), 0o700); err != nil {
		return nil, err
	}
	// Dies with the bench, whatever happens to it.
	dieWithBench := func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	return testbed.StartProcess(filepath.Join(c.Dir, m.Name+".plain.log"), dieWithBench,
		testbed.Binary, plainArgs(c, m, state, initialCluster)...)
}

// stopPlain stops a plain etcd the way its script would: SIGTERM, and
// SIGKILL after etcd's own shutdown has had time enough.
func stopPlain(p *testbed.Process) { _, _ = p.Stop(15 * time.Second) }

// manualRepair is field notes §2, scripted: the member's etcd is already
// stopped (its WAL is corrupt); remove it through a healthy peer, move its
// data dir aside, add it back as a learner, start etcd with
// --initial-cluster-state existing and the initial cluster member add
// returned, and promote it as soon as etcd accepts. It returns the
// running etcd and the new member ID.
func manualRepair(c *testbed.Cluster, peers *clientv3.Client, m testbed.Member, oldID uint64, aside string, marks *scriptMarks) (*testbed.Process, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := peers.MemberRemove(ctx, oldID)
	if err != nil {
		return nil, 0, fmt.Errorf("member remove %x: %w", oldID, err)
	}
	if err := os.Rename(c.DataDir(m.Name), aside); err != nil {
		return nil, 0, fmt.Errorf("mv data dir: %w", err)
	}
	// until etcdctl member add --learner ...; do sleep 0.1; done: etcd
	// refuses adds for 5 s after a voter was down ("unhealthy cluster").
	var add *clientv3.MemberAddResponse
	for {
		add, err = peers.MemberAddAsLearner(ctx, []string{m.PeerURL()})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") || ctx.Err() != nil {
			return nil, 0, fmt.Errorf("member add --learner: %w", err)
		}
		time.Sleep(scriptRetry)
	}
	marks.mark("added")
	newID := add.Member.ID
	var parts []string
	for _, x := range add.Members {
		name := x.Name
		if x.ID == newID {
			name = m.Name
		}
		for _, u := range x.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	sort.Strings(parts)
	p, err := startPlain(c, m, "existing", strings.Join(parts, ","))
	if err != nil {
		return nil, 0, err
	}
	marks.mark("etcd started")
	marks.watchFirstAnswer(func() *clientv3.Client { return c.Client(m.Name) }, m.ClientURL())
	// until etcdctl member promote $ID; do sleep 0.1; done
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := peers.MemberPromote(pctx, newID)
		pcancel()
		if err == nil {
			marks.mark("promoted")
			return p, newID, nil
		}
		if time.Now().After(deadline) {
			marks.stop()
			stopPlain(p)
			return nil, 0, fmt.Errorf("member promote %x: not accepted within 5m: %w", newID, err)
		}
		time.Sleep(scriptRetry)
	}
}

// scriptMarks are a scripted repair's own marks (see stepMarks), from its
// start t0.
type scriptMarks struct {
	t0 time.Time
	mu sync.Mutex
	m  map[string]time.Duration
	// stop ends the watch for the new member's first answer: it may come
	// after the promotion (etcd promotes a learner whose log is caught up,
	// before it serves clients).
	stop func()
}

func (s *scriptMarks) mark(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.m[name]; !seen {
		s.m[name] = time.Since(s.t0)
	}
}

func (s *scriptMarks) get() map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}

// watchFirstAnswer marks "etcd answers" when the new member first
// answers a status request on its own endpoint, until s.stop is called.
// As the bench's observer does, an attempt starts every pollEvery, each
// on a client dialed afresh (newClient; one made before etcd listens would
// wait out gRPC's reconnect backoff), and they overlap: one that waits on
// an etcd not serving yet holds no later one back.
func (s *scriptMarks) watchFirstAnswer(newClient func() *clientv3.Client, endpoint string) {
	ctx, cancel := context.WithTimeout(context.Background(), converge) // bounded, whatever becomes of the script
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		answered := make(chan struct{})
		var once sync.Once
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cli := newClient()
				defer cli.Close()
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				defer acancel()
				if _, err := cli.Status(actx, endpoint); err == nil {
					s.mark("etcd answers")
					once.Do(func() { close(answered) })
				}
			}()
			select {
			case <-ctx.Done():
				return
			case <-answered:
				return
			case <-tick.C:
			}
		}
	}()
	s.stop = func() { cancel(); <-done }
}
