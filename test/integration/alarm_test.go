package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// raiseAlarm raises an alarm on member id through the maintenance API, as
// etcd does itself when it finds a hash mismatch.
func raiseAlarm(t *testing.T, cli *clientv3.Client, id uint64, kind pb.AlarmType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: kind})
	if err != nil {
		t.Fatalf("raise %s alarm on %x: %v", kind, id, err)
	}
}

// TestCorruptAlarm: node3 is down for maintenance when etcd raises a
// CORRUPT alarm naming node2. Stopping node2 would leave node1 alone, so
// node2 keeps running and the cluster keeps serving reads. Once node3 is
// back, node2 is repaired under a new member ID, the alarm of its old ID
// is disarmed, and the cluster takes writes again with every key.
func TestCorruptAlarm(t *testing.T) {
	t.Parallel()
	c, ids := runningCluster(t, 3, repairSpec)
	putKeys(t, c, "alarm", 20)
	if err := c.Stop("node3"); err != nil {
		t.Fatal(err)
	}
	etcdPID := c.EtcdPID("node2")
	cli := c.Client("node1", "node2")
	raiseAlarm(t, cli, ids["node2"], pb.AlarmType_CORRUPT)

	testbed.Eventually(t, converge, "node2's agent to hold back for quorum", func() string {
		if !c.LogContains("node2", "CORRUPT alarm on member", "not stopping it while the others have 1 of 2 voters caught up") {
			return "no such decision logged yet"
		}
		return ""
	})
	if !testbed.Alive(etcdPID) || c.EtcdPID("node2") != etcdPID {
		t.Fatalf("node2's etcd (pid %d) was stopped although node1 alone is no quorum", etcdPID)
	}
	if v, err := c.GetFrom("node1", "alarm/0007"); err != nil || v != "value-7" {
		t.Fatalf("reads stopped while node2 kept running: %q, %v", v, err)
	}

	c.Start("node3")
	testbed.Eventually(t, converge, "node2 repaired under a new ID, no alarm left", func() string {
		o := testbed.Observe(cli)
		got, why := o.ExactVoters(c.AllNames()...)
		switch {
		case why != "":
			return why
		case got["node2"] == ids["node2"]:
			return "node2 still has its old member ID"
		case len(o.Alarms) > 0:
			return fmt.Sprintf("alarms still raised: %v", o.Alarms)
		}
		return ""
	})
	testbed.Put(t, cli, "alarm/after", "written")
	expectKeys(t, c, "node2", "alarm", 21)
	if len(c.Backups("node2")) != 1 {
		t.Errorf("node2's data was not moved aside: backups %v", c.Backups("node2"))
	}
	logged(t, c, "an agent logged the disarm", c.AllNames(), `"msg":"alarm disarmed"`)
}
