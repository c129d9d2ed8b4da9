package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestRequestLost: a command whose request is gone from the cluster (its
// lease ran out while the command could not reach etcd: found by
// TestDefragOffline under load, where the command then waited out its
// whole timeout after the agents were done) says so at once, instead of
// waiting for agents that no longer see a request.
func TestRequestLost(t *testing.T) {
	ep, peer := testetcd.Start(t)
	root := t.TempDir()
	path := writeSpec(t, root, fmt.Sprintf("cluster: {name: c1}\nmembers:\n  - {name: default, peerURLs: [%s], clientURLs: [%s]}\nagent:\n  stateDir: \"ROOT/state/{name}\"\n", peer, ep))
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := cluster.Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	req := model.Request{ID: "r1", Kind: model.RequestDefrag, By: "test", At: time.Now().UTC()}
	q, err := cli.PutRequest(ctx, s.Cluster.Name, req)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// The lease runs out: revoked from elsewhere, as etcd does when no
	// keepalive reached it for its TTL.
	other, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	resp, err := other.Get(ctx, cluster.RequestKey(s.Cluster.Name))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the request: %v %v", resp, err)
	}
	if _, err := other.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	err = followRequest(ctx, &out, s, cli, q, req, 2*time.Minute)
	took := time.Since(start)
	t.Logf("after %s: %v\n%s", took.Round(time.Millisecond), err, out.String())
	if err == nil || !strings.Contains(err.Error(), "the request is gone from the cluster") {
		t.Fatalf("err = %v, want the request said lost", err)
	}
	if took > time.Minute {
		t.Errorf("took %s: waited for agents that no longer see the request", took)
	}
}
