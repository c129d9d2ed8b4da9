package kubeadm

import (
	"slices"
	"strings"
	"testing"
)

// kubeadm's three hosts as the cluster lists them (etcdctl member list).
var (
	liveCP1 = ClusterMember{ID: 0x8211f1d0f64f3269, Name: "cp1", PeerURLs: []string{"https://10.0.0.11:2380"}, ClientURLs: []string{"https://10.0.0.11:2379"}}
	liveCP2 = ClusterMember{ID: 0x91bc3c398fb3c146, Name: "cp2", PeerURLs: []string{"https://10.0.0.12:2380"}, ClientURLs: []string{"https://10.0.0.12:2379"}}
	liveCP3 = ClusterMember{ID: 0xfd422379fda50e48, Name: "cp3", PeerURLs: []string{"https://10.0.0.13:2380"}, ClientURLs: []string{"https://10.0.0.13:2379"}}
)

func liveOf(ms ...ClusterMember) Cluster {
	return Cluster{Endpoint: "https://10.0.0.11:2379", ID: 0xcdf818194e3a8c32, Members: ms}
}

// unstarted is m as the cluster lists a member added but not started:
// no name, no client URLs.
func unstarted(m ClusterMember) ClusterMember {
	return ClusterMember{ID: m.ID, PeerURLs: m.PeerURLs}
}

// liveGoldenCases are imports with the cluster's member list
// (--from-cluster) whose rendered spec is kept in testdata/golden.
var liveGoldenCases = []struct {
	name, golden string
	manifests    []string
	live         Cluster
}{
	// After kubeadm upgrade, cp2's --initial-cluster names only cp2: cp1 and
	// cp3 come from the cluster.
	{"upgraded host, the others from the cluster", "from-cluster-upgraded", []string{"cp2-upgraded.yaml"}, liveOf(liveCP1, liveCP2, liveCP3)},
	// cp3 was added (kubeadm join) but has not started: the cluster knows
	// it by peer URL only, and its manifest gives it its name.
	{"a member not started, by its manifest", "from-cluster-unstarted", []string{"cp1.yaml", "cp3.yaml"}, liveOf(liveCP1, liveCP2, unstarted(liveCP3))},
}

func TestGoldenFromCluster(t *testing.T) {
	for _, tc := range liveGoldenCases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ToSpecLive(loadManifests(t, tc.manifests), tc.live, KubeadmPKI(pkiDir))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, d, tc.golden)
		})
	}
}

// TestToSpecLive: the merge of manifests and the cluster's member list.
// The spec's members are the cluster's; a manifest is authoritative for
// its member; what cannot be merged safely is an error that names it.
func TestToSpecLive(t *testing.T) {
	names := func(d Document) string {
		var out []string
		for _, m := range d.Members {
			out = append(out, m.Name)
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		name      string
		manifests []string
		ms        []Manifest
		live      Cluster
		// members and fromCluster of the result, or err: what the error says.
		members, fromCluster string
		warning              string
		err                  string
	}{
		{
			name:      "upgraded manifest names only itself: the cluster's members",
			manifests: []string{"cp2-upgraded.yaml"},
			live:      liveOf(liveCP1, liveCP2, liveCP3),
			members:   "cp1,cp2,cp3", fromCluster: "cp1,cp3",
			warning: "no manifest of cp1, cp3: name, peerURLs and clientURLs are the cluster's member list's",
		},
		{
			name:      "every manifest: nothing from the cluster",
			manifests: []string{"cp1.yaml", "cp2.yaml", "cp3.yaml"},
			live:      liveOf(liveCP3, liveCP1, liveCP2),
			members:   "cp1,cp2,cp3", fromCluster: "",
		},
		{
			name:      "a hex ID in --initial-cluster is the cluster's cp2",
			manifests: []string{"cp3-unstarted-peer.yaml"},
			live:      liveOf(liveCP1, liveCP2, liveCP3),
			members:   "cp1,cp2,cp3", fromCluster: "cp1,cp2",
		},
		{
			name:      "a member not started is matched to its manifest by peer URL",
			manifests: []string{"cp1.yaml", "cp3.yaml"},
			live:      liveOf(liveCP1, liveCP2, unstarted(liveCP3)),
			members:   "cp1,cp2,cp3", fromCluster: "cp2",
		},
		{
			name:      "a member removed since the manifests were written is left out",
			manifests: []string{"cp3.yaml"},
			live:      liveOf(liveCP1, liveCP3),
			members:   "cp1,cp3", fromCluster: "cp1",
			warning: "names cp2 (in cp3's manifest cp3.yaml), which the cluster does not list",
		},
		{
			name:    "client URLs the cluster lists otherwise: the manifest's, with a warning",
			ms:      []Manifest{host("cp1", "10.0.0.11")},
			live:    liveOf(ClusterMember{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.11:2380"}, ClientURLs: []string{"https://10.0.0.99:2379"}}),
			members: "cp1", fromCluster: "",
			warning: "cp1: its manifest advertises client URLs https://10.0.0.11:2379, the cluster lists https://10.0.0.99:2379",
		},
		{
			name:      "a manifest whose member the cluster does not list",
			manifests: []string{"cp1.yaml", "cp3.yaml"},
			live:      liveOf(liveCP1, liveCP2),
			err:       "cp3.yaml: member cp3 (peer URLs https://10.0.0.13:2380) is not in the cluster's member list (read from https://10.0.0.11:2379: cp1=https://10.0.0.11:2380, cp2=https://10.0.0.12:2380)",
		},
		{
			name:      "a manifest of a member in a kubectl List the cluster does not list: its line",
			manifests: []string{"kubectl-list.yaml"},
			live:      liveOf(liveCP1, liveCP2),
			err:       "kubectl-list.yaml:",
		},
		{
			name:      "peer URLs differ between the cluster and the manifest",
			manifests: []string{"cp1.yaml"},
			live:      liveOf(ClusterMember{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.21:2380"}, ClientURLs: []string{"https://10.0.0.11:2379"}}),
			err:       "cp1.yaml: member cp1: the cluster lists its peer URLs as https://10.0.0.21:2380, its manifest as https://10.0.0.11:2380",
		},
		{
			name:      "a member not started with no manifest",
			manifests: []string{"cp1.yaml"},
			live:      liveOf(liveCP1, unstarted(liveCP2)),
			err:       "member 91bc3c398fb3c146 (peer URLs https://10.0.0.12:2380) has not started yet",
		},
		{
			name:      "a learner: a join in progress",
			manifests: []string{"cp1.yaml"},
			live:      liveOf(liveCP1, ClusterMember{ID: 2, Name: "cp2", PeerURLs: liveCP2.PeerURLs, IsLearner: true}),
			err:       "member cp2 (2, https://10.0.0.12:2380) is a learner",
		},
		{
			name:      "two members with one name",
			manifests: []string{"cp1.yaml"},
			live:      liveOf(liveCP1, ClusterMember{ID: 2, Name: "cp2", PeerURLs: liveCP2.PeerURLs}, ClusterMember{ID: 3, Name: "cp2", PeerURLs: liveCP3.PeerURLs}),
			err:       "two members are named cp2",
		},
		{
			name:      "an empty member list",
			manifests: []string{"cp1.yaml"},
			live:      liveOf(),
			err:       "the cluster lists no members",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := tc.ms
			if len(tc.manifests) > 0 {
				ms = loadManifests(t, tc.manifests)
			}
			d, err := ToSpecLive(ms, tc.live, KubeadmPKI(pkiDir))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(d); got != tc.members {
				t.Errorf("members = %s, want %s", got, tc.members)
			}
			if got := strings.Join(d.FromCluster, ","); got != tc.fromCluster {
				t.Errorf("from the cluster: %q, want %q", got, tc.fromCluster)
			}
			if tc.warning != "" && !anyContains(d.Warnings, tc.warning) {
				t.Errorf("no warning with %q in:\n%s", tc.warning, strings.Join(d.Warnings, "\n"))
			}
			// Every member the cluster lists has its peer URLs in the spec:
			// the agents act on no membership change.
			for _, lm := range tc.live.Members {
				if !slices.ContainsFunc(d.Members, func(m Member) bool { return sameURLs(m.PeerURLs, lm.PeerURLs) }) {
					t.Errorf("cluster member %x (%v) is not in the spec", lm.ID, lm.PeerURLs)
				}
			}
			for _, m := range d.Members {
				if slices.Contains(d.FromCluster, m.Name) != strings.HasPrefix(m.Note, "From the cluster's member list") {
					t.Errorf("%s: note %q, from the cluster: %v", m.Name, m.Note, d.FromCluster)
				}
			}
		})
	}
}
