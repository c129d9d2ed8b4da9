package spec

import (
	"strings"
	"testing"
)

// TestMemoryWarnings: validate warns when quota-backend-bytes exceeds half
// of the host's memory or snapshot-count is above 10 000, in etcd.flags
// or a member's flags, with the line; not otherwise.
func TestMemoryWarnings(t *testing.T) {
	const members = "cluster:\n  name: c\nmembers:\n  - name: n1\n    peerURLs: [http://127.0.0.1:2380]\n    clientURLs: [http://127.0.0.1:2379]\n"
	const gib = int64(1) << 30
	tests := []struct {
		name, etcd string
		mem        int64
		want       []string
	}{
		{"defaults, 16 GiB", "", 16 * gib, nil},
		{"8 GiB quota on 16 GiB: at half, fine", "etcd:\n  flags:\n    quota-backend-bytes: 8589934592\n", 16 * gib, nil},
		{"8 GiB quota on 8 GiB", "etcd:\n  flags:\n    quota-backend-bytes: 8589934592\n", 8 * gib, []string{"spec.yaml:7: etcd.flags: quota-backend-bytes 8.0 GiB is above half of this host's memory (8.0 GiB)"}},
		{"memory not known", "etcd:\n  flags:\n    quota-backend-bytes: 8589934592\n", 0, nil},
		{"snapshot-count 10000: etcd's default", "etcd:\n  flags:\n    snapshot-count: 10000\n", 16 * gib, nil},
		{"snapshot-count 100000", "etcd:\n  flags:\n    snapshot-count: 100000\n", 16 * gib, []string{"spec.yaml:7: etcd.flags: snapshot-count 100000 is above 10000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(members+tt.etcd), "spec.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got := MemoryWarnings(s, tt.mem)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %v, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if e := got[i]; !strings.Contains(e.Error(), w) {
					t.Errorf("warning %q, want one with %q", e.Error(), w)
				}
			}
		})
	}
	s, err := Parse([]byte("cluster:\n  name: c\nmembers:\n  - name: n1\n    peerURLs: [http://127.0.0.1:2380]\n    clientURLs: [http://127.0.0.1:2379]\n    flags:\n      snapshot-count: 50000\n"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := MemoryWarnings(s, 16*gib); len(got) != 1 || !strings.Contains(got[0].Error(), "spec.yaml:4: member n1: flags: snapshot-count 50000") {
		t.Errorf("a member's flags: %v", got)
	}
	if MemTotal() <= 0 {
		t.Error("MemTotal: this host's memory is not read from /proc/meminfo")
	}
}
