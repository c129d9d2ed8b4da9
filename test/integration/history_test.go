package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// historyOf runs etcdkeeper history -o json and returns the events of
// host (every host's for ""), in the order printed.
func historyOf(t *testing.T, c *testbed.Cluster, host string) ([]history.Event, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbed.Binary, "history", "--config", c.Spec, "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Sprintf("history: %v: %s", err, stderr.String())
	}
	var all, mine []history.Event
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Sprintf("history -o json: %v: %s", err, out)
	}
	for _, e := range all {
		if host == "" || e.Host == host {
			mine = append(mine, e)
		}
	}
	return mine, ""
}

// logHistory logs etcdkeeper history's table, for the reader of the test.
func logHistory(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	out, err := exec.Command(testbed.Binary, "history", "--config", c.Spec).CombinedOutput()
	t.Logf("etcdkeeper history (%v):\n%s", err, out)
}

// inOrder finds events of the kinds want, in that order, among evs.
func inOrder(evs []history.Event, want ...string) (map[string]history.Event, string) {
	got := map[string]history.Event{}
	i := 0
	for _, e := range evs {
		if i < len(want) && e.Kind == want[i] {
			got[e.Kind] = e
			i++
		}
	}
	if i < len(want) {
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		return got, fmt.Sprintf("events %v, want %v in that order", kinds, want)
	}
	return got, ""
}

// repairEvents finds a repair's events in order among evs.
func repairEvents(evs []history.Event) (map[string]history.Event, string) {
	return inOrder(evs, "remove", "add-learner", "promote", "repair-done")
}

// TestHistoryAfterRepair: a member's WAL is corrupted and repaired; the
// history lists the repair's steps in order with the host, the member
// IDs, the reason and where the data went, in the cluster (pushed) and in
// the agent's mirror; and with no quorum left, history still lists them
// from the agents' mirrors.
func TestHistoryAfterRepair(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "/k", 20)
	if err := c.Stop("node2"); err != nil {
		t.Fatal(err)
	}
	c.CorruptWAL("node2")
	c.Start("node2")
	after := c.WaitVoters(converge, c.AllNames()...)

	var evs map[string]history.Event
	testbed.Eventually(t, converge, "history lists node2's repair", func() string {
		mine, why := historyOf(t, c, "node2")
		if why != "" {
			return why
		}
		evs, why = repairEvents(mine)
		return why
	})
	old, repaired := history.HexID(ids["node2"]), history.HexID(after["node2"])
	if e := evs["remove"]; e.MemberID != old {
		t.Errorf("remove: member %s, want node2's old ID %s", e.MemberID, old)
	}
	for _, k := range []string{"add-learner", "promote", "repair-done"} {
		if e := evs[k]; e.MemberID != repaired {
			t.Errorf("%s: member %s, want node2's new ID %s", k, e.MemberID, repaired)
		}
	}
	done := evs["repair-done"]
	if !strings.Contains(done.Reason, "corrupt") {
		t.Errorf("repair-done: reason %q, want why the data was corrupt", done.Reason)
	}
	if b := c.Backups("node2"); len(b) != 1 || done.Detail["backup"] != b[0] {
		t.Errorf("repair-done: backup %q, want where the data went: %v", done.Detail["backup"], b)
	}
	if done.Detail["oldMemberID"] != old || done.Detail["newMemberID"] != repaired || done.Detail["snapshot"] == "" {
		t.Errorf("repair-done: detail %v, want the old and new IDs and the safety snapshot", done.Detail)
	}
	logHistory(t, c)

	mirror, err := history.ReadFile(filepath.Join(c.StateDir("node2"), history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, why := repairEvents(mirror); why != "" {
		t.Errorf("node2's mirror: %s", why)
	}
	testbed.Eventually(t, converge, "the cluster holds node2's repair-done", func() string {
		return inClusterHistory(c, done)
	})

	// No quorum: node1 and node3 stopped. The mirrors still tell.
	for _, n := range []string{"node1", "node3"} {
		if err := c.Stop(n); err != nil {
			t.Fatal(err)
		}
	}
	mine, why := historyOf(t, c, "node2")
	if why != "" {
		t.Fatal(why)
	}
	if _, why := repairEvents(mine); why != "" {
		t.Fatalf("without quorum: %s", why)
	}
}

// inClusterHistory: the cluster's history keys hold ev ("" when so).
func inClusterHistory(c *testbed.Cluster, ev history.Event) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Client().Get(ctx, "/etcdkeeper/itest/history/"+ev.ID())
	if err != nil {
		return err.Error()
	}
	if len(resp.Kvs) != 1 {
		return "not in the cluster yet"
	}
	return ""
}
