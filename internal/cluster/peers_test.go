package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestClusterWithout asks a real etcd's peer port whether it belongs to a
// cluster that lists a host.
func TestClusterWithout(t *testing.T) {
	_, peer := startEtcdURLs(t)
	running := spec.Member{Name: "default", PeerURLs: []string{peer}}
	stranger := spec.Member{Name: "new", PeerURLs: []string{"http://127.0.0.99:2380"}}
	ctx := context.Background()

	if why := ClusterWithout(ctx, stranger, []spec.Member{running}); !strings.Contains(why, "not including this host") {
		t.Errorf("a host the running cluster does not list: %q, want evidence of a cluster without it", why)
	}
	if why := ClusterWithout(ctx, running, []spec.Member{running}); why != "" {
		t.Errorf("a host the cluster lists: %q, want none", why)
	}
	nobody := spec.Member{Name: "gone", PeerURLs: []string{"http://127.0.0.98:1"}}
	if why := ClusterWithout(ctx, stranger, []spec.Member{nobody}); why != "" {
		t.Errorf("no peer answering: %q, want none", why)
	}
}

// TestPeerMemberList reads a real etcd's peer /members: the running member
// with the name and client URLs its publish set, and a learner added but
// never started without them (what publishInSnapshot tells apart).
func TestPeerMemberList(t *testing.T) {
	peer, _, added, _ := addedLearner(t)
	ms, cid, err := PeerMemberList(context.Background(), peer, spec.Member{})
	if err != nil {
		t.Fatal(err)
	}
	if cid == "" {
		t.Error("no cluster ID in the answer")
	}
	var running, learner *PeerMember
	for i, m := range ms {
		switch {
		case m.ID == added.ID:
			learner = &ms[i]
		case len(m.PeerURLs) == 1 && m.PeerURLs[0] == peer:
			running = &ms[i]
		}
	}
	if running == nil || running.Name == "" || len(running.ClientURLs) == 0 || running.IsLearner {
		t.Errorf("running member = %+v, want a voter with its name and client URLs (members %+v)", running, ms)
	}
	if learner == nil || learner.Name != "" || len(learner.ClientURLs) != 0 || !learner.IsLearner {
		t.Errorf("added learner = %+v, want a learner without name or client URLs (members %+v)", learner, ms)
	}
}
