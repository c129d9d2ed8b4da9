package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// turnKey is where the agents keep the host turn (read here as etcd's own
// client sees it).
const turnKey = "/etcdkeeper/itest/turn"

// guardRun is one `etcdkeeper guard` run: its command writes when it
// started and ended into dir.
type guardRun struct {
	name       string
	cmd        *exec.Cmd
	out        strings.Builder
	start, end float64
}

// startGuard runs `etcdkeeper guard [flags] -- sh -c SCRIPT` as name's
// host would, in a process group of its own (a reboot ends all of it).
func startGuard(t *testing.T, c *testbed.Cluster, name, dir string, flags []string, script string) *guardRun {
	t.Helper()
	args := append([]string{"guard", "--config", c.SpecPath(name), "--name", name}, flags...)
	args = append(args, "--", "sh", "-c", fmt.Sprintf("date +%%s.%%N > %s/%s.start; %s; date +%%s.%%N > %s/%s.end", dir, name, script, dir, name))
	g := &guardRun{name: name, cmd: exec.Command(testbed.Binary, args...)}
	g.cmd.Stdout, g.cmd.Stderr = &g.out, &g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("guard on %s: %v", name, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL) })
	return g
}

func readStamp(t *testing.T, path string) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// watchServing follows the cluster every 100 ms until stopped: the
// fewest healthy voters seen, and the longest time without a leader.
type watchServing struct {
	stop       chan struct{}
	done       chan struct{}
	fewest     atomic.Int64
	leaderless atomic.Int64 // ns
}

func startWatchServing(c *testbed.Cluster) *watchServing {
	w := &watchServing{stop: make(chan struct{}), done: make(chan struct{})}
	w.fewest.Store(int64(len(c.Members)))
	cli := c.Client()
	go func() {
		defer close(w.done)
		var since time.Time
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			o := testbed.Observe(cli)
			n := healthyVoters(o)
			// A member that does not answer its status within the
			// observer's second on a loaded machine is not a member
			// down: a dip counts only when two more observations at
			// once (round robin: to the other members) agree.
			for tries := 1; (o.Err != nil || n < 2) && tries < 3; tries++ {
				o = testbed.Observe(cli)
				n = healthyVoters(o)
			}
			if o.Err == nil && int64(n) < w.fewest.Load() {
				w.fewest.Store(int64(n))
			}
			switch {
			case o.Leader() != 0:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			case time.Since(since).Nanoseconds() > w.leaderless.Load():
				w.leaderless.Store(time.Since(since).Nanoseconds())
			}
		}
	}()
	return w
}

func healthyVoters(o testbed.Observation) int {
	n := 0
	for _, m := range o.Voters() {
		if m.HealthyVoter() {
			n++
		}
	}
	return n
}

func (w *watchServing) Stop() {
	close(w.stop)
	<-w.done
}

// TestHostTurnsOneAtATime: three hosts run `etcdkeeper guard --stop-etcd
// -- CMD` in the same second: their commands run one at a time, the
// leader's host last, each only once the host before it has its member a
// caught-up voter again; never fewer than 2 healthy voters, no write of a
// retrying client fails. Then a host "reboots" inside its turn (its guard
// and agent killed, the agent started again under another boot ID): the
// next host's turn waits until the restarted agent has seen its member
// catch up and ended the turn. maintenance start|end holds and gives back
// a turn by hand; an unprivileged user cannot ask for one.
func TestHostTurnsOneAtATime(t *testing.T) {
	c := testbed.New(t, 3)
	c.WriteSpec()
	for _, n := range c.AllNames() {
		c.Start(n)
	}
	c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client()
	dir := t.TempDir()

	o := testbed.Observe(cli)
	leader := ""
	for _, m := range o.Voters() {
		if m.ID == o.Leader() {
			leader = m.Name
		}
	}
	w := c.StartWriter("turns", 5*time.Second, c.AllNames()...)
	watch := startWatchServing(c)
	began := time.Now()
	var runs []*guardRun
	for _, n := range c.AllNames() {
		runs = append(runs, startGuard(t, c, n, dir, []string{"--stop-etcd"}, "sleep 2"))
	}
	var wg sync.WaitGroup
	for _, g := range runs {
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- g.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("guard on %s: %v\n%s", g.name, err, g.out.String())
				}
			case <-time.After(5 * time.Minute):
				t.Errorf("guard on %s did not finish within 5 minutes:\n%s", g.name, g.out.String())
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	watch.Stop()
	w.Stop()
	if t.Failed() {
		for _, n := range c.AllNames() {
			c.DumpLog(n, 40)
		}
		t.FailNow()
	}
	for _, g := range runs {
		g.start, g.end = readStamp(t, filepath.Join(dir, g.name+".start")), readStamp(t, filepath.Join(dir, g.name+".end"))
		t.Logf("%s: command ran %.1f s → %.1f s after the guards began; its guard said:\n%s", g.name, g.start-float64(began.UnixNano())/1e9, g.end-float64(began.UnixNano())/1e9, g.out.String())
	}
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.start < b.end && b.start < a.end {
				t.Errorf("the commands of %s and %s overlapped: [%.2f, %.2f] and [%.2f, %.2f]", a.name, b.name, a.start, a.end, b.start, b.end)
			}
		}
	}
	for _, g := range runs {
		if g.name == leader {
			continue
		}
		for _, l := range runs {
			if l.name == leader && l.start < g.end {
				t.Errorf("the leader's host %s took its turn before %s's was over", leader, g.name)
			}
		}
	}
	if f := watch.fewest.Load(); f < 2 {
		t.Errorf("only %d healthy voters at one point, want never fewer than 2 of 3", f)
	}
	if n := w.Failed.Load(); n > 0 {
		t.Errorf("%d writes failed (last: %v)", n, w.LastErr.Load())
	}
	t.Logf("three guards at once: all done in %s; fewest healthy voters %d; longest without a leader %s; writes %d ok, %d failed, longest %s",
		took.Round(100*time.Millisecond), watch.fewest.Load(), time.Duration(watch.leaderless.Load()).Round(time.Millisecond), w.OK.Load(), w.Failed.Load(), time.Duration(w.MaxStall.Load()).Round(time.Millisecond))
	if r, err := cli.Get(context.Background(), turnKey); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the turn key after every turn ended: %v, %v; want none", r, err)
	}

	// A reboot inside node2's turn; node3 asks meanwhile.
	reboot := filepath.Join(dir, "node2.rebooting")
	g2 := startGuard(t, c, "node2", dir, nil, "touch "+reboot+"; sleep 600")
	testbed.Eventually(t, converge, "node2's command runs in its turn", func() string {
		if _, err := os.Stat(reboot); err != nil {
			return err.Error()
		}
		return ""
	})
	_ = syscall.Kill(-g2.cmd.Process.Pid, syscall.SIGKILL)
	_ = g2.cmd.Wait()
	if err := c.Stop("node2"); err != nil {
		t.Logf("node2's agent: %v", err)
	}
	g3 := startGuard(t, c, "node3", dir, nil, "true")
	time.Sleep(3 * time.Second) // the host is down
	restarted := time.Now()
	c.Start("node2", "ETCDKEEPER_BOOT_ID=after-the-reboot")
	if err := g3.cmd.Wait(); err != nil {
		t.Fatalf("guard on node3: %v\n%s", err, g3.out.String())
	}
	s3 := readStamp(t, filepath.Join(dir, "node3.start"))
	if s3 < float64(restarted.UnixNano())/1e9 {
		t.Errorf("node3's command ran %.1f s before node2's agent came back from its reboot", float64(restarted.UnixNano())/1e9-s3)
	}
	if !c.LogContains("node2", `"msg":"host turn ended"`) {
		t.Errorf("node2's restarted agent did not end its turn")
	}
	t.Logf("node3's turn came %.1f s after node2's agent restarted; node3's guard said:\n%s", s3-float64(restarted.UnixNano())/1e9, g3.out.String())

	// Hand work: maintenance start --stop-etcd holds the turn, end gives it back.
	etcdkeeper(t, "maintenance", "start", "--config", c.SpecPath("node1"), "--name", "node1", "--stop-etcd", "--reason", "NIC swap")
	if r, err := cli.Get(context.Background(), turnKey); err != nil || len(r.Kvs) != 1 || !strings.Contains(string(r.Kvs[0].Value), "NIC swap") {
		t.Fatalf("the turn key in maintenance: %v, %v", r, err)
	}
	if pid := c.EtcdPID("node1"); pid != 0 && testbed.Alive(pid) {
		t.Errorf("node1's etcd (pid %d) runs in a maintenance started with --stop-etcd", pid)
	}
	etcdkeeper(t, "maintenance", "end", "--config", c.SpecPath("node1"), "--name", "node1")
	if r, err := cli.Get(context.Background(), turnKey); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the turn key after maintenance end: %v, %v; want none", r, err)
	}
	c.WaitVoters(converge, c.AllNames()...)

	// Nobody else on the host asks for a turn: the spec readable to all
	// (as /etc/etcdkeeper/cluster.yaml is), the control socket is not.
	open, err := os.MkdirTemp("", "turn-spec-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(open)
	spec, err := os.ReadFile(c.SpecPath("node3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(open, "cluster.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		testbed.Binary, "guard", "--config", filepath.Join(open, "cluster.yaml"), "--name", "node3", "--", "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "control socket") {
		t.Errorf("guard as uid 65534: %v, want refused at the control socket:\n%s", err, out)
	}
	if r, gerr := cli.Get(context.Background(), turnKey); gerr != nil || len(r.Kvs) != 0 {
		t.Errorf("uid 65534's guard left a turn: %v, %v", r, gerr)
	}
	t.Logf("guard as uid 65534: %v: %s", err, strings.TrimSpace(string(out)))
}
