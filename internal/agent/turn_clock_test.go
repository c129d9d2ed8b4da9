package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestTurnReleaseTimedOnThisAgentsClock: another host's turn is expired
// for this agent once it has seen the key unchanged (one ModRevision)
// for maintenance.hostTurnTimeout on its own clock, whatever the
// holder's clock wrote into Renewed: a holder's clock a day behind does
// not get a turn renewed a moment ago released, and one an hour ahead
// does not keep a dead host's turn. A real etcd holds the key.
func TestTurnReleaseTimedOnThisAgentsClock(t *testing.T) {
	client, peer := testetcd.Start(t)
	dir := t.TempDir()
	s, err := spec.Parse(fmt.Appendf(nil, `cluster: {name: c}
members:
  - {name: default, peerURLs: [%s], clientURLs: [%s], dataDir: %s}
agent: {stateDir: %s}
`, peer, client, filepath.Join(dir, "data"), filepath.Join(dir, "state")), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Spec: s, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ensureClient(); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	// renew writes node9's turn as its agent would, its clock off by skew.
	renew := func(skew time.Duration) {
		t.Helper()
		at := time.Now().Add(skew).Round(0)
		b, _ := json.Marshal(model.HostTurn{ID: "t9", Member: "node9", MemberID: 9, Kind: model.TurnGuard, Why: "guard: systemctl reboot", Since: at, Renewed: at})
		if _, err := cli.Put(ctx, cluster.TurnKey("c"), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	observe := func() *model.HostTurn {
		t.Helper()
		in := reconcile.Input{Self: s.Members[0], Cluster: &model.Cluster{}}
		a.observeTurn(ctx, &in)
		if in.Cluster == nil || in.Cluster.Turn == nil {
			t.Fatalf("the turn key was not read")
		}
		return in.Cluster.Turn
	}
	// passTime plays this agent's clock running on by d.
	passTime := func(d time.Duration) { a.turnSight.at = a.turnSight.at.Add(-d) }
	timeout := s.Maintenance.HostTurnTimeout.Duration

	renew(-24 * time.Hour)
	if tr := observe(); tr.Expired(timeout) {
		t.Fatalf("a turn just renewed by a host whose clock is a day behind is expired (unchanged for %s)", tr.Unchanged)
	}
	passTime(timeout / 2)
	if tr := observe(); tr.Expired(timeout) || tr.Unchanged < timeout/2 {
		t.Fatalf("unchanged for half the timeout here: expired %v, unchanged %s", tr.Expired(timeout), tr.Unchanged)
	}
	renew(-24 * time.Hour) // a new revision: renewed
	if tr := observe(); tr.Expired(timeout) || tr.Unchanged >= timeout/2 {
		t.Fatalf("renewed: the count starts again, got unchanged %s", tr.Unchanged)
	}
	passTime(timeout + time.Second)
	if tr := observe(); !tr.Expired(timeout) {
		t.Fatalf("unchanged for longer than the timeout here: not expired (unchanged %s)", tr.Unchanged)
	}

	renew(time.Hour)
	if tr := observe(); tr.Expired(timeout) {
		t.Fatalf("a turn just renewed by a host whose clock is an hour ahead is expired (unchanged %s)", tr.Unchanged)
	}
	passTime(timeout + time.Second)
	if tr := observe(); !tr.Expired(timeout) {
		t.Fatalf("a dead host's turn whose clock was an hour ahead is not expired after the timeout (unchanged %s)", tr.Unchanged)
	}
}
