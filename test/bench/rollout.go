package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// The rollout scenario (issue 22 §3): a 3-member cluster and a steady
// writer through all members, rolled onto a new version two ways: etcd
// 3.6.16 → 3.7.3 through the spec's etcd.binary (the spec edited, every
// agent sent SIGHUP), and a new etcdkeeper package installed on all three
// hosts at once (each host's copy replaced by rename, as dpkg does). Each
// is timed from the change to every member on the new version; the
// writer's longest stall, p99 and failed writes, and the leader changes
// (the raft term's rise) are what a client saw.

type rolloutRun struct {
	what    string
	D       time.Duration
	W       writes
	Stall   time.Duration
	Leaders uint64
}

// skipFatal: testbed.EtcdBinary skips when the module cannot be fetched;
// the bench has no skip, so that fails the scenario.
type skipFatal struct{ *testbed.Runner }

func (s skipFatal) Skipf(format string, args ...any) { s.Fatalf("cannot run: "+format, args...) }

func (b *bench) rollout() {
	var runs []rolloutRun
	b.scenario("rollout-etcd", func(r *testbed.Runner) {
		old := testbed.EtcdBinary(skipFatal{r}, "v3.6.16")
		next := testbed.EtcdBinary(skipFatal{r}, "v3.7.3")
		c := newCluster(r, 3)
		specWith := func(bin string) string {
			return strings.Replace(c.SpecText(), "etcd:\n", "etcd:\n  binary: "+bin+"\n", 1)
		}
		c.WriteHostSpec("node1", specWith(old))
		startAll(c, c.AllNames()...)
		wait(r, c.Client(), "3 healthy voters", healthy(c.AllNames()...))
		waitEtcdVersion(r, c, "3.6.16")
		run := timeRollout(r, c, func() {
			c.WriteHostSpec("node1", specWith(next))
			for _, n := range c.AllNames() {
				must(r, c.Signal(n, syscall.SIGHUP))
			}
		}, func() { waitEtcdVersion(r, c, "3.7.3") })
		run.what = "etcd 3.6.16 → 3.7.3 (spec)"
		runs = append(runs, run)
		b.say("rollout %s: %s, longest stall %s, p99 %s, %d/%d failed, %d leader changes", run.what, ms(run.D), ms(run.Stall), ms(run.W.P99), run.W.Failed, run.W.OK+run.W.Failed, run.Leaders)
	})
	b.scenario("rollout-package", func(r *testbed.Runner) {
		c := newCluster(r, 3)
		newBin := filepath.Join(c.Dir, "etcdkeeper-new")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version=0.0.2-bench", "-o", newBin, "github.com/etcdkeeper/etcdkeeper/cmd/etcdkeeper")
		if out, err := cmd.CombinedOutput(); err != nil {
			r.Fatalf("go build the new etcdkeeper (run the bench from the repository): %v\n%s", err, out)
		}
		installed := map[string]string{}
		for _, n := range c.AllNames() {
			installed[n] = filepath.Join(c.Dir, n, "bin", "etcdkeeper")
			copyFile(r, testbed.Binary, installed[n])
			c.StartBinary(n, installed[n])
		}
		wait(r, c.Client(), "3 healthy voters", healthy(c.AllNames()...))
		for _, n := range c.AllNames() {
			copyFile(r, newBin, installed[n]+".dpkg-new")
		}
		run := timeRollout(r, c, func() {
			for _, n := range c.AllNames() {
				must(r, os.Rename(installed[n]+".dpkg-new", installed[n]))
			}
		}, func() { waitAgentVersion(r, c, "0.0.2-bench") })
		run.what = "etcdkeeper package, all hosts at once"
		runs = append(runs, run)
		b.say("rollout %s: %s, longest stall %s, p99 %s, %d/%d failed, %d leader changes", run.what, ms(run.D), ms(run.Stall), ms(run.W.P99), run.W.Failed, run.W.OK+run.W.Failed, run.Leaders)
	})
	b.mu.Lock()
	b.rollouts = append(b.rollouts, runs...)
	b.mu.Unlock()
}

// timeRollout starts a writer through all members, does change, and waits
// for done; the window is the change to done.
func timeRollout(r testbed.TB, c *testbed.Cluster, change, done func()) rolloutRun {
	w := writers{startWriter(c.Client(), "/bench/w")}
	defer w.Stop()
	steady()
	term0 := raftTerm(r, c)
	t0 := time.Now()
	change()
	done()
	end := time.Now()
	time.Sleep(writeTimeout + writeEvery)
	wait(r, c.Client(), "3 healthy voters after the rollout", healthy(c.AllNames()...))
	stall, _ := w.longestStall(t0, end)
	return rolloutRun{D: end.Sub(t0), W: w.window(t0, end), Stall: stall, Leaders: raftTerm(r, c) - term0}
}

// raftTerm is the highest raft term a member reports: each leader change
// raises it by at least one.
func raftTerm(r testbed.TB, c *testbed.Cluster) uint64 {
	cli := c.Client()
	var term uint64
	testbed.Eventually(r, time.Minute, "a member's status", func() string {
		for _, m := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cli.Status(ctx, m.ClientURL())
			cancel()
			if err == nil {
				term = max(term, st.RaftTerm)
			}
		}
		if term == 0 {
			return "no member answers Status"
		}
		return ""
	})
	return term
}

// waitEtcdVersion waits until every member's etcd serves version.
func waitEtcdVersion(r testbed.TB, c *testbed.Cluster, version string) {
	testbed.Eventually(r, 5*time.Minute, "every member on etcd "+version, func() string {
		for _, m := range c.Members {
			var v struct {
				Server string `json:"etcdserver"`
			}
			if err := getJSON(m.ClientURL()+"/version", &v); err != nil {
				return err.Error()
			}
			if v.Server != version {
				return fmt.Sprintf("%s runs etcd %s", m.Name, v.Server)
			}
		}
		return ""
	})
}

// waitAgentVersion waits until every agent runs version, with no install
// pending and its member healthy.
func waitAgentVersion(r testbed.TB, c *testbed.Cluster, version string) {
	testbed.Eventually(r, 5*time.Minute, "every agent on "+version, func() string {
		for _, m := range c.Members {
			var st struct {
				Version   string          `json:"version"`
				Installed json.RawMessage `json:"installed"`
				Healthy   bool            `json:"healthy"`
			}
			if err := getJSON(fmt.Sprintf("http://%s:%d/status", m.IP, m.AgentPort), &st); err != nil {
				return err.Error()
			}
			if st.Version != version || (len(st.Installed) > 0 && string(st.Installed) != "null") || !st.Healthy {
				return fmt.Sprintf("%s runs %s (installed %s, healthy %v)", m.Name, st.Version, st.Installed, st.Healthy)
			}
		}
		return ""
	})
}

func getJSON(url string, v any) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

func copyFile(r testbed.TB, from, to string) {
	must(r, os.MkdirAll(filepath.Dir(to), 0o755))
	in, err := os.Open(from)
	must(r, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	must(r, err)
	_, err = io.Copy(out, in)
	must(r, err)
	must(r, out.Close())
}

// rolloutTable: one line per rollout.
func (b *bench) rolloutTable() string {
	if len(b.rollouts) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nrollout of 3 members onto a new version, a steady writer through all members (1 put / %s, a single attempt with a %s deadline); from the change to every member on the new version. Leader changes: the raft term's rise\n\n", writeEvery, writeTimeout)
	head := []string{"rollout", "took", "longest write stall", "p99", "failed writes", "leader changes", "target", "met"}
	fmt.Fprintf(&sb, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, x := range b.rollouts {
		failed := fmt.Sprintf("%d/%d", x.W.Failed, x.W.Failed+x.W.OK)
		if x.W.LastErr != "" {
			failed += " [" + x.W.LastErr + "]"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %d | 0 failed writes, ≤ 2 leader changes | %s, %s |\n",
			x.what, ms(x.D), ms(x.Stall), msShort(x.W.P99), failed, x.Leaders, yesNo(x.W.Failed == 0), yesNo(x.Leaders <= 2))
	}
	return sb.String()
}
