package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// smallQuota is the tests' quota-backend-bytes: 16 MiB.
const smallQuota = 16 << 20

func quotaFlag(bytes int64) string {
	return fmt.Sprintf("    quota-backend-bytes: %q\n", fmt.Sprint(bytes))
}

// fillUntilFull writes 100 KiB values under prefix until etcd refuses
// puts ("database space exceeded") and an agent says that the data fills
// the quota. The first NOSPACE usually comes with free pages left (bbolt's
// page splits): the agents then compact, defragment and disarm, and the
// writes go on until the keys themselves fill 90 % of the quota. Bounded
// by 2000 puts and three minutes.
func fillUntilFull(t *testing.T, c *testbed.Cluster, cli *clientv3.Client, prefix string) int {
	t.Helper()
	value := strings.Repeat("x", 100<<10)
	deadline := time.Now().Add(3 * time.Minute)
	refused := 0
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("%s/%05d", prefix, i), value)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			if refused == 0 {
				t.Logf("put %d refused: %v", i, err)
			}
			refused++
			if anyLog(c, "NOSPACE stays raised: the data fills the quota") {
				t.Logf("%d puts written, %d refused; the agents say the data fills the quota", i, refused)
				return i
			}
			time.Sleep(200 * time.Millisecond)
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		}
	}
	t.Fatalf("no agent said that the data fills the quota (%d puts refused)", refused)
	return 0
}

// memberQuotas are the members' db sizes and quotas as etcd reports them.
func memberQuotas(t *testing.T, c *testbed.Cluster) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	cli := c.Client()
	for _, n := range c.AllNames() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, c.Member(n).ClientURL())
		cancel()
		if err == nil {
			out[n] = [2]int64{st.DbSize, st.DbSizeQuota}
		}
	}
	return out
}

// writable is "" once the cluster takes a put and lists no alarm.
func writable(c *testbed.Cluster, key string) string {
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, "written"); err != nil {
		return "put: " + err.Error()
	}
	o := testbed.Observe(cli)
	switch {
	case o.Err != nil: // no alarm list: not "no alarm"
		return o.Err.Error()
	case len(o.Alarms) > 0:
		return fmt.Sprintf("alarms still raised: %v", o.Alarms)
	}
	return ""
}

// countLogs is how many lines of the agents' logs hold every part.
func countLogs(c *testbed.Cluster, parts ...string) int {
	n := 0
	for _, name := range c.AllNames() {
		b, _ := os.ReadFile(c.LogPath(name))
		for _, line := range strings.Split(string(b), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				n++
			}
		}
	}
	return n
}

// leaderUnderAlarm is the leader that the members answering as themselves
// agree on, in the first observation through cli where they do, alarms
// or not. (Observation.Leader counts healthy members only, and under
// NOSPACE no member is: a single Observe's Leader() was 0 before and
// after, and "the leader did not move" held whatever happened.)
func leaderUnderAlarm(t *testing.T, cli *clientv3.Client) uint64 {
	t.Helper()
	var leader uint64
	_, err := testbed.Await(cli, converge, 300*time.Millisecond, func(o testbed.Observation) string {
		leader = 0
		for _, m := range o.Members {
			switch {
			case !m.AsItself || m.Leader == 0:
			case leader != 0 && m.Leader != leader:
				return fmt.Sprintf("members name leaders %x and %x", leader, m.Leader)
			default:
				leader = m.Leader
			}
		}
		if leader == 0 {
			return "no member names a leader"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("observing the leader: %v", err)
	}
	return leader
}

// anyLog: some agent's log holds every part.
func anyLog(c *testbed.Cluster, parts ...string) bool {
	for _, n := range c.AllNames() {
		if c.LogContains(n, parts...) {
			return true
		}
	}
	return false
}

// TestNoSpaceRecovers: a 3-member cluster with a 16 MiB quota is filled
// until etcd refuses puts ("database space exceeded"); the keys are
// deleted again (deletes are what etcd takes under NOSPACE). With no
// human, the agents compact, defragment every member (the leader after
// handing off) and disarm: the cluster takes writes again, every member
// under its own ID, no alarm left.
func TestNoSpaceRecovers(t *testing.T) {
	c := testbed.New(t, 3)
	c.EtcdFlags = quotaFlag(smallQuota)
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client()
	n := fillUntilFull(t, c, cli, "fill")
	if o := answered(t, cli); len(o.Alarms) == 0 {
		t.Fatal("no alarm raised while the data fills the quota")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	del, err := cli.Delete(ctx, "fill/", clientv3.WithPrefix())
	cancel()
	if err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	deleted := time.Now()
	t.Logf("%d keys written, %d deleted at revision %d", n, del.Deleted, del.Header.Revision)
	testbed.Eventually(t, 2*converge, "the cluster takes writes again, no alarm", func() string {
		return writable(c, "nospace/after")
	})
	t.Logf("writes accepted again %s after the deletes", time.Since(deleted).Round(100*time.Millisecond))
	for n, q := range memberQuotas(t, c) {
		if float64(q[0]) >= 0.9*float64(q[1]) {
			t.Errorf("%s's db is %d of a %d quota after the procedure", n, q[0], q[1])
		}
	}
	after := c.WaitVoters(converge, c.AllNames()...)
	for name, id := range ids {
		if after[name] != id {
			t.Errorf("%s's member ID changed: %x -> %x", name, id, after[name])
		}
	}
	for _, msg := range []string{`"msg":"NOSPACE: compacted"`, `"msg":"NOSPACE: disarmed, the cluster takes writes again"`, `"msg":"defragmented"`} {
		if !anyLog(c, msg) {
			t.Errorf("no agent logged %s", msg)
		}
	}
	testbed.Eventually(t, converge, "history lists the NOSPACE procedure", func() string {
		evs, why := historyOf(t, c, "")
		if why != "" {
			return why
		}
		kinds := map[string]bool{}
		for _, e := range evs {
			kinds[e.Kind] = true
		}
		for _, k := range []string{"nospace-raised", "nospace-compacted", "nospace-disarmed", "defrag"} {
			if !kinds[k] {
				return fmt.Sprintf("no %s event in %v", k, kinds)
			}
		}
		return ""
	})
	for _, n := range c.AllNames() {
		if c.LogContains(n, "stopped etcd") || c.LogContains(n, "stop-for-repair") {
			t.Errorf("%s's agent stopped its etcd under NOSPACE", n)
		}
	}
}

// TestNoSpaceDataFillsQuota: the data in use really fills the quota, so
// a disarm would only trip again: the agents leave NOSPACE raised and say
// why (status, the log). A raised quota-backend-bytes in the spec is
// applied member by member without the cluster lock (etcd refuses its
// lease under NOSPACE), and then the alarm is disarmed.
func TestNoSpaceDataFillsQuota(t *testing.T) {
	c := testbed.New(t, 3)
	c.EtcdFlags = quotaFlag(smallQuota)
	c.WriteSpec()
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client()
	testbed.Put(t, cli, "/nospace/small", "x")
	testbed.Put(t, cli, "/nospace/small2", "x")
	fillUntilFull(t, c, cli, "fill")
	testbed.Eventually(t, converge, "status says the data fills the quota", func() string {
		out, _ := etcdkeeperExit(t, "status", "--config", c.Spec)
		if !strings.Contains(out, "NOSPACE STAYS RAISED: data in use") || !strings.Contains(out, "raise etcd quota-backend-bytes or delete data") {
			return "status:\n" + out
		}
		return ""
	})
	if o := answered(t, cli); len(o.Alarms) == 0 {
		t.Fatal("the alarm was disarmed although the data fills the quota")
	}
	if !anyLog(c, "NOSPACE stays raised: the data fills the quota") {
		t.Error("no agent logged that the data fills the quota")
	}
	// A delete that frees next to nothing (on Kubernetes, an event's
	// lease expiring every few seconds) moves the revision on: the agents
	// compact again, and do not defragment the members again for it.
	// First the acting agent (the leader's) must have measured and said
	// so itself: the others and the commands may say it before.
	testbed.Eventually(t, converge, "the leader's agent says the data fills the quota", func() string {
		leader := leaderUnderAlarm(t, cli)
		for n, id := range ids {
			if id != leader {
				continue
			}
			var st struct {
				NoSpaceFull string `json:"nospaceFull"`
			}
			if err := c.AgentStatus(n, &st); err != nil {
				return err.Error()
			}
			if st.NoSpaceFull == "" {
				return n + "'s agent (the leader's) does not say it yet"
			}
			return ""
		}
		return "no member leads"
	})
	defrags := countLogs(c, `"msg":"defragmented"`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	del, err := cli.Delete(ctx, "/nospace/small")
	cancel()
	if err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	rev := fmt.Sprintf(`"revision":%d`, del.Header.Revision)
	testbed.Eventually(t, converge, "the agents compact to the delete's revision", func() string {
		if !anyLog(c, `"msg":"NOSPACE: compacted"`, rev) {
			return "no compaction to " + rev
		}
		return ""
	})
	for _, n := range c.AllNames() {
		c.KickPasses(converge, 3, n)
	}
	// A compaction can show a member's figure below the line for the
	// first time (only the member that served it reports its data
	// afresh, and layouts differ by a few per cent): each member may be
	// measured once more for that news, and no more, however many such
	// deletes follow.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	del, err = cli.Delete(ctx, "/nospace/small2")
	cancel()
	if err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	rev = fmt.Sprintf(`"revision":%d`, del.Header.Revision)
	testbed.Eventually(t, converge, "the agents compact to the second delete's revision", func() string {
		if !anyLog(c, `"msg":"NOSPACE: compacted"`, rev) {
			return "no compaction to " + rev
		}
		return ""
	})
	for _, n := range c.AllNames() {
		c.KickPasses(converge, 3, n)
	}
	if n := countLogs(c, `"msg":"defragmented"`); n-defrags > len(ids) {
		t.Errorf("%d defragmentations after two deletes that freed next to nothing (%d before them): more than one per member, the members are measured again and again", n-defrags, defrags)
	}
	// Every agent says so, not only the actor's (a follower's agent used
	// to say "next: compact" for as long as it lasted).
	testbed.Eventually(t, converge, "every agent's /status says the data fills the quota", func() string {
		for _, n := range c.AllNames() {
			var st struct {
				NoSpaceFull string `json:"nospaceFull"`
				NoSpace     string `json:"nospace"`
			}
			if err := c.AgentStatus(n, &st); err != nil {
				return err.Error()
			}
			if !strings.Contains(st.NoSpaceFull, "raise etcd quota-backend-bytes or delete data") {
				return fmt.Sprintf("%s's agent: nospaceFull %q, nospace %q", n, st.NoSpaceFull, st.NoSpace)
			}
		}
		return ""
	})
	// The commands an operator reaches for say what holds and change
	// nothing: a health check fails, plan puts NOSPACE first, defrag and
	// leader move (which need the lock etcd refuses) say why.
	if _, code := etcdkeeperExit(t, "status", "--config", c.Spec, "-q"); code != 2 {
		t.Errorf("status -q under NOSPACE: exit %d, want 2 (writes are refused)", code)
	}
	if out, code := etcdkeeperExit(t, "plan", "--config", c.Spec); code != 2 || !strings.Contains(out, "NOSPACE STAYS RAISED") {
		t.Errorf("plan under NOSPACE: exit %d:\n%s\nwant exit 2 and the NOSPACE line", code, out)
	}
	leader := leaderUnderAlarm(t, cli)
	var other string
	for n, id := range ids {
		if id != leader {
			other = n
		}
	}
	for _, args := range [][]string{{"defrag", "--config", c.Spec, "--yes"}, {"leader", "move", "--config", c.Spec, "--to", other}} {
		// ... and what holds the procedure: here the data, which only the
		// operator can do something about.
		if out, code := etcdkeeperExit(t, args...); code != 2 || !strings.Contains(out, "NOSPACE is raised") || !strings.Contains(out, "NOSPACE STAYS RAISED: data in use") {
			t.Errorf("etcdkeeper %s under NOSPACE: exit %d:\n%s\nwant exit 2 saying NOSPACE is raised and that the data fills the quota", strings.Join(args, " "), code, out)
		}
	}
	if now := leaderUnderAlarm(t, cli); now != leader {
		t.Errorf("the leader moved from %x to %x under NOSPACE", leader, now)
	}

	c.EtcdFlags = quotaFlag(4 * smallQuota)
	c.WriteSpec()
	raised := time.Now()
	testbed.Eventually(t, 3*converge, "every member on the raised quota, writes accepted", func() string {
		for n, q := range memberQuotas(t, c) {
			if q[1] != 4*smallQuota {
				return fmt.Sprintf("%s's quota is %d", n, q[1])
			}
		}
		return writable(c, "nospace/after-raise")
	})
	t.Logf("writes accepted again %s after the quota raise", time.Since(raised).Round(100*time.Millisecond))
	after := c.WaitVoters(converge, c.AllNames()...)
	for name, id := range ids {
		if after[name] != id {
			t.Errorf("%s's member ID changed: %x -> %x", name, id, after[name])
		}
	}
	// Each member restarted by the NOSPACE rule (no lock can be taken),
	// the leader after handing its leadership off.
	for _, n := range c.AllNames() {
		if !c.LogContains(n, `"key":"restart/nospace"`) {
			t.Errorf("%s was not restarted for the raised quota by the NOSPACE rule", n)
		}
	}
	if !anyLog(c, `"key":"restart/nospace-move-leader/`) {
		t.Error("no agent handed its leadership off before its restart for the raised quota")
	}
}

// TestNoSpaceAfterAgentCrash: every agent exits hard (a test crash point,
// as kill -9 would) when it starts a defragmentation, also the NOSPACE
// procedure's. Nothing is left half-done: the restarted agents observe
// again, compact once more (etcd answers a compacted revision at once),
// defragment what is still large and disarm.
func TestNoSpaceAfterAgentCrash(t *testing.T) {
	c := testbed.New(t, 3)
	c.EtcdFlags = quotaFlag(smallQuota)
	c.WriteSpec()
	for _, m := range c.Members {
		c.Start(m.Name, "ETCDKEEPER_TEST_CRASH_AT=defrag")
	}
	ids := c.WaitVoters(converge, c.AllNames()...)
	cli := c.Client()
	// Until etcd refuses a put: the agents crash at their first
	// defragmentation, so nobody would say that the data fills the quota.
	value := strings.Repeat("x", 100<<10)
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1000 puts of 100 KiB and no NOSPACE")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("fill/%05d", i), value)
		cancel()
		if errors.Is(err, rpctypes.ErrNoSpace) {
			t.Logf("put %d refused: %v", i, err)
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := cli.Delete(ctx, "fill/", clientv3.WithPrefix())
	cancel()
	if err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	crashed := map[string]bool{}
	testbed.Eventually(t, 3*converge, "writes accepted again, crashed agents restarted", func() string {
		restartCrashed(c, crashed)
		return writable(c, "nospace/after")
	})
	if len(crashed) == 0 {
		t.Fatal("no agent reached the crash point")
	}
	t.Logf("crashed mid-procedure: %v", crashed)
	restartWithoutCrashPoint(t, c, crashed)
	after := c.WaitVoters(converge, c.AllNames()...)
	checkNoDefragTemps(t, c)
	for name, id := range ids {
		if after[name] != id {
			t.Errorf("%s's member ID changed: %x -> %x", name, id, after[name])
		}
	}
	if w := writable(c, "nospace/final"); w != "" {
		t.Errorf("after the restarts: %s", w)
	}
}
