package integration

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// TestScaleUpAndDown edits the spec from 3 to 5 members and back while a
// client writes all the while; a removed member does not come back.
func TestScaleUpAndDown(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 5)
	three := []string{"node1", "node2", "node3"}
	c.WriteSpec(three...)
	for _, n := range three {
		c.Start(n)
	}
	ids := c.WaitVoters(converge, three...)
	w := c.StartWriter("/w", 2*time.Second, three...)

	start := time.Now()
	c.WriteSpec()
	c.Start("node4")
	c.Start("node5")
	c.WaitVoters(converge, c.AllNames()...)
	t.Logf("3→5: spec edit to 5 healthy voters in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	c.WriteSpec(three...)
	after := c.WaitVoters(converge, three...)
	t.Logf("5→3: spec edit to 3 healthy voters in %s", time.Since(start).Round(time.Millisecond))
	w.Stop()
	for _, n := range three {
		if after[n] != ids[n] {
			t.Errorf("%s changed member ID during the scale changes", n)
		}
	}
	if f := w.Failed.Load(); f > 0 {
		t.Errorf("%d writes failed (ok %d): %v", f, w.OK.Load(), w.LastErr.Load())
	}
	t.Logf("writes: %d ok, %d failed", w.OK.Load(), w.Failed.Load())

	for _, n := range []string{"node4", "node5"} {
		testbed.Eventually(t, converge, n+"'s agent goes idle with its etcd stopped and its data kept", func() string {
			switch {
			case !c.LogContains(n, "idle: "):
				return "agent not idle"
			case testbed.Alive(c.EtcdPID(n)):
				return "etcd still running"
			case len(c.Backups(n)) != 1:
				return fmt.Sprintf("backups %v", c.Backups(n))
			}
			return ""
		})
	}
	// Several more passes of every agent (asked for: the three run steady,
	// one pass in 5 s by themselves): the removed members stay out.
	c.KickPasses(converge, 3, c.AllNames()...)
	// The first member list answered after them lists the three voters
	// only. (WaitVoters with 5 s asked for more: all three healthy within
	// 5 s, each status answered within a second, a fresh client included:
	// too little on a loaded 2-core machine, and beside the point.)
	o, err := testbed.Await(c.Client(three...), converge, 300*time.Millisecond, testbed.Answered)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range o.Members {
		if m.Learner || !slices.Contains(three, m.Name) {
			t.Errorf("after the removals and 3 more passes the member list has %s (%x, learner %v)", m.Name, m.ID, m.Learner)
		}
		names = append(names, m.Name)
	}
	if len(names) != len(three) {
		t.Errorf("after the removals and 3 more passes the member list is %v, want %v", names, three)
	}
	c.WaitVoters(converge, three...)
}

// TestSpecEdits: invalid edits leave the cluster and the agents alone; an
// in-place write and an atomic replace are both picked up.
func TestSpecEdits(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	pids := map[string]int{}
	for _, m := range c.Members {
		pids[m.Name] = c.EtcdPID(m.Name)
	}
	good, err := os.ReadFile(c.Spec)
	if err != nil {
		t.Fatal(err)
	}

	bad := map[string]string{
		"invalid YAML":    "cluster:\n  name: itest\nmembers: [\n",
		"duplicate names": strings.Replace(string(good), "name: node3", "name: node2", 1),
	}
	for what, content := range bad {
		if err := os.WriteFile(c.Spec, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Members {
			name := m.Name
			testbed.Eventually(t, converge, name+" rejects the spec with "+what, func() string {
				if !c.LogContains(name, "spec rejected") {
					return "no rejection logged"
				}
				return ""
			})
		}
		// Three more passes of each agent, each after SIGHUP: it reads the
		// bad spec again each time, and keeps the last good one.
		c.KickPasses(converge, 3, c.AllNames()...)
		after := c.WaitVoters(converge, c.AllNames()...)
		for _, m := range c.Members {
			if after[m.Name] != ids[m.Name] || c.EtcdPID(m.Name) != pids[m.Name] || !testbed.Alive(pids[m.Name]) {
				t.Fatalf("%s: member or etcd changed after an edit with %s", m.Name, what)
			}
		}
	}

	inPlace := append(append([]byte{}, good...), []byte("# edited in place\n")...)
	if err := os.WriteFile(c.Spec, inPlace, 0o644); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c, inPlace)

	replaced := append(append([]byte{}, good...), []byte("# replaced by rename\n")...)
	tmp := c.Spec + ".new"
	if err := os.WriteFile(tmp, replaced, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.Spec); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c, replaced)
	c.WaitVoters(converge, c.AllNames()...)
}

func waitApplied(t *testing.T, c *testbed.Cluster, content []byte) {
	t.Helper()
	gen := fmt.Sprintf("%x", sha256.Sum256(content))[:12]
	for _, m := range c.Members {
		name := m.Name
		testbed.Eventually(t, converge, name+" applies spec generation "+gen, func() string {
			if !c.LogContains(name, "spec applied", `"to":"`+gen+`"`) {
				return "not applied"
			}
			return ""
		})
	}
}

// TestPeerURLChange moves node3's peer port: the member is updated (same
// ID) and its etcd restarted on the new port, one member at a time.
func TestPeerURLChange(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	startAll(c)
	ids := c.WaitVoters(converge, c.AllNames()...)
	w := c.StartWriter("/w", 2*time.Second, "node1", "node2")

	c.Members[2].PeerPort = testbed.FreePort(t, c.Members[2].IP)
	newURL := c.Members[2].PeerURL()
	c.WriteSpec()
	testbed.Eventually(t, converge, "node3 is a healthy voter at "+newURL, func() string {
		o := testbed.Observe(c.Client())
		if o.Err != nil {
			return o.Err.Error()
		}
		if m, _ := o.ByName("node3"); len(m.PeerURLs) == 0 || m.PeerURLs[0] != newURL {
			return fmt.Sprintf("node3 peer URLs %v", m.PeerURLs)
		}
		return ""
	})
	after := c.WaitVoters(converge, c.AllNames()...)
	w.Stop()
	if after["node3"] != ids["node3"] {
		t.Errorf("node3's member ID changed: a peer URL change is a member update, not a replacement")
	}
	if f := w.Failed.Load(); f > 0 {
		t.Errorf("%d writes failed: %v", f, w.LastErr.Load())
	}
	testbed.Eventually(t, converge, "history lists node3's peer URL update", func() string {
		evs, why := historyOf(t, c, "")
		if why != "" {
			return why
		}
		for _, e := range evs {
			if e.Kind == "update-peer-urls" && e.Member == "node3" && e.MemberID == fmt.Sprintf("%x", ids["node3"]) && e.Detail["peerURLs"] == newURL && e.Reason != "" {
				return ""
			}
		}
		return fmt.Sprintf("no update-peer-urls of node3 to %s in %+v", newURL, evs)
	})
}

// TestStaleLearnerRemoved: node4's agent adds node4 as a learner and dies
// before starting etcd; after agent.learnerTimeout the lock holder removes
// the learner so that it does not block the single learner slot.
func TestStaleLearnerRemoved(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 4)
	c.Extra = "" // the timeout goes under agent:, written by WriteSpec
	c.AgentExtra = "  learnerTimeout: 3s\n"
	c.WriteSpec("node1", "node2", "node3")
	for _, n := range []string{"node1", "node2", "node3"} {
		c.Start(n)
	}
	c.WaitVoters(converge, "node1", "node2", "node3")
	c.WriteSpec()
	c.Start("node4", "ETCDKEEPER_TEST_CRASH_AT=start")
	if err := c.WaitExit("node4", converge); err == nil {
		t.Fatal("node4's agent did not stop at its crash point")
	}
	testbed.Eventually(t, converge, "the stale learner is removed", func() string {
		o := testbed.Observe(c.Client("node1", "node2", "node3"))
		if o.Err != nil {
			return o.Err.Error()
		}
		if len(o.Members) != 3 {
			return fmt.Sprintf("%d members", len(o.Members))
		}
		return ""
	})
	removedBy := logged(t, c, "an agent logged the removal of the stale learner", []string{"node1", "node2", "node3"}, `"msg":"membership change"`, `"kind":"remove"`)
	// node4's own agent recorded its add; the remover, the removal.
	testbed.Eventually(t, converge, "history lists node4's add and its removal as stale", func() string {
		evs, why := historyOf(t, c, "")
		if why != "" {
			return why
		}
		var added string
		for _, e := range evs {
			switch {
			case e.Host == "node4" && e.Kind == "add-learner":
				added = e.MemberID
			case e.Host == removedBy && e.Kind == "remove" && e.Member == "node4" && added != "" && e.MemberID == added && e.Reason != "":
				return ""
			}
		}
		return fmt.Sprintf("no add-learner by node4 then remove by %s in %+v", removedBy, evs)
	})
	// node4 started again joins for real.
	c.Start("node4")
	c.WaitVoters(converge, c.AllNames()...)
}
