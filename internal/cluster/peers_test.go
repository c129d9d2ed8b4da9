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
