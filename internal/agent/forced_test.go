package agent

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// member is one etcd of TestForcedStartTakesOnce, on a data dir of the
// test's own, so that it can be stopped and started again.
type member struct {
	name, dir     string
	peer, client  url.URL
	e             *embed.Etcd
	initial, mode string
	force         bool
}

func (m *member) start(t *testing.T) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.name, m.dir
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
	cfg.InitialCluster, cfg.ClusterState, cfg.ForceNewCluster = m.initial, m.mode, m.force
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	m.e = e
	t.Cleanup(m.stop)
}

func (m *member) ready(t *testing.T) {
	t.Helper()
	select {
	case <-m.e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatalf("etcd %s did not become ready", m.name)
	}
}

func (m *member) stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

func newMember(t *testing.T, name string) *member {
	return &member{name: name, dir: filepath.Join(t.TempDir(), name), peer: testetcd.FreeURL(t), client: testetcd.FreeURL(t), mode: embed.ClusterStateFlagNew}
}

// TestForcedStartTakesOnce: real data dirs along a recovery from quorum
// loss, each judged by the source's decision with its journal left at
// forced (the finish and its journal write failing) and no cluster in
// sight. Before the forced start took, it forces (again); once it took,
// and after two new members joined the forced cluster (three members
// listed), it starts the member as it is: never a second
// --force-new-cluster (F5).
func TestForcedStartTakesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	a, b, c := newMember(t, "node1"), newMember(t, "node2"), newMember(t, "node3")
	initial := fmt.Sprintf("node1=%s,node2=%s,node3=%s", a.peer.String(), b.peer.String(), c.peer.String())
	for _, m := range []*member{a, b, c} {
		m.initial = initial
		m.start(t)
	}
	for _, m := range []*member{a, b, c} {
		m.ready(t)
	}
	aID, bID, cID := uint64(a.e.Server.MemberID()), uint64(b.e.Server.MemberID()), uint64(c.e.Server.MemberID())
	for _, m := range []*member{a, b, c} {
		m.stop()
	}

	desired := []spec.Member{{Name: "node1", PeerURLs: []string{a.peer.String()}, ClientURLs: []string{a.client.String()}},
		{Name: "node2", PeerURLs: []string{b.peer.String()}, ClientURLs: []string{b.client.String()}},
		{Name: "node3", PeerURLs: []string{c.peer.String()}, ClientURLs: []string{c.client.String()}}}
	decide := func(stage string, forcedFrom []uint64) (reconcile.Action, model.Data) {
		t.Helper()
		d := dataOf(repair.Inspect(nil, a.dir))
		if d.Kind != model.DataHealthy {
			t.Fatalf("%s: node1's data is %s: %s", stage, d.Kind, d.Reason)
		}
		r := model.Recovery{ID: "r1", Role: model.RecoverySource, Step: "forced", Source: "node1", OldMemberID: aID, OldClusterID: d.ClusterID, ForcedFrom: forcedFrom}
		return reconcile.Decide(reconcile.Input{Self: desired[0], InSpec: true, Desired: desired, Local: model.Local{Data: d, Recovery: r}}), d
	}

	// Quorum lost, the forced start journaled, and etcd never got to it.
	before, d := decide("before the forced start", nil)
	forcedFrom := d.Members
	if !sameIDs(forcedFrom, aID, bID, cID) {
		t.Fatalf("the data lists members %x, want node1, node2, node3 (%x %x %x)", forcedFrom, aID, bID, cID)
	}
	if act, _ := decide("before the forced start", forcedFrom); act.Kind != reconcile.DoForceNewCluster {
		t.Errorf("before the forced start took: Decide = %s %q, want force-new-cluster", act.Kind, act.Reason)
	}
	t.Logf("before the forced start, a journal without forcedFrom: %s %q", before.Kind, before.Reason)

	a.force = true
	a.start(t)
	a.ready(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.client.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitMembers(t, cli, 1)
	a.stop()
	if act, d := decide("the forced start took, nobody joined yet", forcedFrom); act.Kind != reconcile.DoStart || act.Start.Action != reconcile.ActStartAsIs {
		t.Errorf("after the forced start (data lists %x): Decide = %s %q, want start as it is", d.Members, act.Kind, act.Reason)
	}

	// Two new members join the forced cluster, as the fenced hosts' rejoins
	// do: a learner each, promoted once it runs.
	a.force = false
	a.start(t)
	a.ready(t)
	joined := []string{"node1=" + a.peer.String()}
	for _, name := range []string{"node2", "node3"} {
		n := newMember(t, name+"-new")
		n.name = name
		resp := addLearner(t, cli, n.peer.String())
		joined = append(joined, name+"="+n.peer.String())
		n.initial, n.mode = strings.Join(joined, ","), embed.ClusterStateFlagExisting
		n.start(t)
		n.ready(t)
		promote(t, cli, resp.Member.ID)
	}
	waitMembers(t, cli, 3)
	a.stop()
	act, d := decide("two members joined", forcedFrom)
	if len(d.Members) != 3 || slices.Contains(d.Members, bID) || slices.Contains(d.Members, cID) {
		t.Errorf("after the joins node1's data lists %x, want itself and the two new members", d.Members)
	}
	if act.Kind != reconcile.DoStart || act.Start.Action != reconcile.ActStartAsIs || !strings.Contains(act.Reason, "which joined after the forced start") {
		t.Errorf("after two members joined: Decide = %s %q, want start as it is, never forced again", act.Kind, act.Reason)
	}
	t.Logf("decision: %s", act.Reason)
	if act, _ := decide("two members joined, a journal without forcedFrom", nil); act.Kind != reconcile.DoStart || act.Start.Action != reconcile.ActStartAsIs {
		t.Errorf("after two members joined, journal without forcedFrom: Decide = %s %q, want start as it is", act.Kind, act.Reason)
	}
}

func sameIDs(got []uint64, want ...uint64) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

func waitMembers(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err == nil && len(resp.Members) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %d members within 30s: %v %v", n, resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addLearner adds a learner at peerURL: etcd refuses until the member
// has been connected to a quorum for a few seconds ("unhealthy cluster").
func addLearner(t *testing.T, cli *clientv3.Client, peerURL string) *clientv3.MemberAddResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		cancel()
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("add learner %s: %v", peerURL, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promote promotes learner id once it has caught up (etcd refuses until
// then).
func promote(t *testing.T, cli *clientv3.Client, id uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.MemberPromote(ctx, id)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote %x: %v", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
