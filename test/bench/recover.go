package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// The recovery from a lost quorum: a 3-member cluster loaded with data
// loses node2 and node3 (agents stopped, both WALs corrupted, agents
// started again: each reports "quorum lost: manual recovery needed" and
// changes nothing), and the operator runs `etcdkeeper recover --from node1
// --yes`. Timed from the command's start until the bench's observer sees 3
// healthy voters: node1 under its old member ID, node2 and node3 rejoined
// under new ones. A fresh cluster per run.

// recoverWait is the command's --wait, and the bench's bound on the same
// wait.
const recoverWait = 10 * time.Minute

type recoverRow struct {
	size string
	db   int64
	runs []recoverRun
}

// recoverRun is one recovery; every time is from the command's start.
type recoverRun struct {
	// D: the bench's observer sees 3 healthy voters.
	D time.Duration
	// One, Two: it first sees 1 (node1 forced into a one-member cluster)
	// and 2 healthy voters.
	One, Two time.Duration
	// Plan: the command printed "Recovery <id> from": every agent asked,
	// the quorum checked, the recovery accepted (its own clock starts here).
	Plan time.Duration
	// Own: the command's "Recovered: 3 healthy voters, X s after recover
	// --yes"; Exit: the command exited.
	Own, Exit time.Duration
}

var recoveredLine = regexp.MustCompile(`Recovered: (\d+) healthy voters, ([0-9.]+)s after recover --yes`)

func (b *bench) recoverQuorum(size string, bytes int64, valueSize, runs int) {
	rr := recoverRow{size: size}
	b.scenario("recover-"+strings.ReplaceAll(size, " ", ""), func(r *testbed.Runner) {
		for i := 0; i < runs; i++ {
			run, db := recoverOnce(r, b, size, bytes, valueSize, i)
			rr.runs = append(rr.runs, run)
			rr.db = max(rr.db, db)
			b.say("recover %s run %d: 3 healthy voters %s after the command's start (1: %s, 2: %s); its plan %s; its own: recovered %s after --yes, exit %s",
				size, i+1, ms(run.D), ms(run.One), ms(run.Two), ms(run.Plan), ms(run.Own), ms(run.Exit))
		}
	})
	var evs []event
	for _, x := range rr.runs {
		evs = append(evs, event{D: x.D})
	}
	b.mu.Lock()
	b.recov = append(b.recov, rr)
	b.mu.Unlock()
	b.add(row{what: fmt.Sprintf("quorum lost (node2's and node3's WALs corrupt) → `recover --from node1 --yes` → 3 healthy voters, %s (db %d MB)", size, rr.db>>20),
		keeper: evs, noWriter: true})
}

// recoverOnce runs one recovery on a fresh cluster; it returns its times
// and the db size.
func recoverOnce(r *testbed.Runner, b *bench, size string, bytes int64, valueSize, n int) (recoverRun, int64) {
	c := newCluster(r, 3)
	defer killAll(c) // no idle cluster eats the next run's CPU
	c.Extra = repairSpec
	c.WriteSpec()
	all := c.AllNames()
	startAll(c, all...)
	wait(r, c.Client(), "3 healthy voters", healthy(all...))
	load(r, c.Client(), bytes, valueSize)
	_, o := wait(r, c.Client(), "3 healthy voters after the load", healthy(all...))
	ids, _ := o.ExactVoters(all...)
	db := o.Members[0].DBSize
	keys := int64(bytes / int64(valueSize))

	lost := []string{"node2", "node3"}
	noLeader := noLeaderLines(c, "node1")
	for _, x := range lost {
		must(r, c.Stop(x))
	}
	for _, x := range lost {
		c.CorruptWAL(x)
		c.Start(x)
	}
	t0 := time.Now()
	// Until every agent has seen it: node2's and node3's say so; node1's
	// etcd, the leader a moment ago, steps down an election timeout after
	// it lost its quorum, and until its agent's next pass sees no leader
	// its agent still calls it a healthy voter, and recover refuses ("node1
	// is a healthy voter: its cluster has a quorum").
	testbed.Eventually(r, converge, "every agent reports the quorum lost", func() string {
		for _, x := range lost {
			if !c.LogContains(x, "quorum lost: manual recovery needed") {
				return x + " has not reported quorum lost"
			}
		}
		if noLeaderLines(c, "node1") == noLeader {
			return "node1's agent has not seen its member without a leader"
		}
		return ""
	})
	b.say("recover %s run %d: loaded (db %d MB); node2 and node3 corrupt; every agent reports the quorum lost %s after their start", size, n+1, db>>20, ms(time.Since(t0)))

	cli := c.Client()
	var run recoverRun
	out := &stampedLines{}
	cmd := exec.Command(testbed.Binary, "recover", "--config", c.Spec, "--from", "node1", "--yes", "--wait", recoverWait.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	must(r, cmd.Start())
	out.start = start
	read := make(chan struct{})
	go func() { out.read(pr); close(read) }()
	type exit struct {
		err error
		at  time.Duration
	}
	exited := make(chan exit, 1)
	var failed atomic.Bool
	go func() {
		err := cmd.Wait()
		at := time.Since(start)
		failed.Store(err != nil)
		pw.Close()
		exited <- exit{err, at}
	}()

	o, err := testbed.Await(cli, recoverWait, pollEvery, func(o testbed.Observation) string {
		if failed.Load() {
			return "" // the command failed: no use waiting
		}
		h := 0
		for _, m := range o.Members {
			if m.HealthyVoter() {
				h++
			}
		}
		if h >= 1 && run.One == 0 {
			run.One = o.End.Sub(start)
		}
		if h >= 2 && run.Two == 0 {
			run.Two = o.End.Sub(start)
		}
		if id := o.ID("node1"); id != ids["node1"] {
			return fmt.Sprintf("node1 is member %x, was %x", id, ids["node1"])
		}
		for _, x := range lost {
			if o.ID(x) == ids[x] {
				return x + " still has its old member"
			}
		}
		_, why := o.ExactVoters(all...)
		return why
	})
	if err != nil {
		_ = cmd.Process.Kill()
		<-read
		r.Fatalf("recover %s: 3 healthy voters: %v\n%s", size, err, out.text())
	}
	run.D = o.End.Sub(start)
	var ex exit
	select {
	case ex = <-exited:
	case <-time.After(recoverWait + time.Minute):
		_ = cmd.Process.Kill()
		ex = <-exited
	}
	<-read
	run.Exit = ex.at
	_ = os.WriteFile(filepath.Join(c.Dir, fmt.Sprintf("recover-%d.out", n+1)), []byte(out.text()), 0o644)
	if ex.err != nil {
		r.Fatalf("recover --from node1 --yes: %v\n%s", ex.err, out.text())
	}
	run.Plan = out.first("Recovery ")
	m := recoveredLine.FindStringSubmatch(out.text())
	if m == nil || m[1] != "3" {
		r.Fatalf("recover did not say \"Recovered: 3 healthy voters\":\n%s", out.text())
	}
	secs, _ := strconv.ParseFloat(m[2], 64)
	run.Own = time.Duration(secs * float64(time.Second))

	// Every key on every member, each asked itself; the lost members'
	// old data moved aside once, not deleted.
	for _, x := range all {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Client(x).Get(ctx, "/bench/data/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		cancel()
		if err != nil {
			r.Errorf("%s after the recovery: %v", x, err)
		} else if resp.Count != keys {
			r.Errorf("%s after the recovery holds %d keys, want %d", x, resp.Count, keys)
		}
	}
	for _, x := range lost {
		if bk := c.Backups(x); len(bk) != 1 {
			r.Errorf("%s's corrupt data: %v, want it moved aside once", x, bk)
		}
	}
	return run, db
}

// noLeaderLines counts the decision lines of member name's agent that say
// its etcd has no leader.
func noLeaderLines(c *testbed.Cluster, name string) int {
	b, _ := os.ReadFile(c.LogPath(name))
	return strings.Count(string(b), `"key":"wait/no-leader"`)
}

// stampedLines is a command's output, each line with the time it arrived.
type stampedLines struct {
	start time.Time
	mu    sync.Mutex
	lines []string
	at    []time.Duration
}

func (s *stampedLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		s.at = append(s.at, time.Since(s.start))
		s.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

func (s *stampedLines) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// first is when the first line beginning with prefix arrived, 0 if none.
func (s *stampedLines) first(prefix string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			return s.at[i]
		}
	}
	return 0
}

// recoverTable: each size's recoveries, medians and every run.
func (b *bench) recoverTable() string {
	if len(b.recov) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nrecovery from quorum loss: `etcdkeeper recover --config SPEC --from node1 --yes --wait %s`, node2's and node3's WALs corrupt and their agents reporting quorum lost; a fresh cluster per run; times from the command's start, medians (each run):\n\n", recoverWait)
	head := []string{"data", "3 healthy voters (the bench's observer)", "1 healthy voter (node1 forced alone)", "2 healthy voters", "the plan printed (agents asked, recovery accepted)", "the command: \"Recovered … after recover --yes\"", "the command exited"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, x := range b.recov {
		col := func(f func(recoverRun) time.Duration) string {
			var ds []time.Duration
			var each []string
			for _, r := range x.runs {
				ds = append(ds, f(r))
				each = append(each, ms(f(r)))
			}
			return fmt.Sprintf("%s (%s)", ms(medianD(ds)), strings.Join(each, ", "))
		}
		cells := []string{fmt.Sprintf("%s, db %d MB (%d runs)", x.size, x.db>>20, len(x.runs)),
			col(func(r recoverRun) time.Duration { return r.D }),
			col(func(r recoverRun) time.Duration { return r.One }),
			col(func(r recoverRun) time.Duration { return r.Two }),
			col(func(r recoverRun) time.Duration { return r.Plan }),
			col(func(r recoverRun) time.Duration { return r.Own }),
			col(func(r recoverRun) time.Duration { return r.Exit }),
		}
		fmt.Fprintf(&sb, "| %s |\n", strings.Join(cells, " | "))
	}
	return sb.String()
}
