package cluster

import (
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// TestQuotaOf: etcd's own answer first (3.6+), then the spec's flag for
// the member (its own over the cluster's), then etcd's default.
func TestQuotaOf(t *testing.T) {
	s, err := spec.Parse([]byte(`cluster: {name: t}
members:
  - {name: a, peerURLs: [http://10.0.0.1:2380], clientURLs: [http://10.0.0.1:2379]}
  - {name: b, peerURLs: [http://10.0.0.2:2380], clientURLs: [http://10.0.0.2:2379], flags: {quota-backend-bytes: "8589934592"}}
etcd:
  flags: {quota-backend-bytes: "4294967296"}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{quotas: s.Quotas()}
	for _, tt := range []struct {
		name     string
		reported int64
		want     int64
	}{
		{"a", 1 << 30, 1 << 30},
		{"a", 0, 4 << 30},
		{"b", 0, 8 << 30},
		{"gone", 0, model.DefaultQuota},
	} {
		if got := c.quotaOf(tt.name, tt.reported); got != tt.want {
			t.Errorf("quotaOf(%s, %d) = %d, want %d", tt.name, tt.reported, got, tt.want)
		}
	}
}
