package agent

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func TestInitialCluster(t *testing.T) {
	members := []model.Member{
		{ID: 1, Name: "node1", PeerURLs: []string{"http://127.0.0.1:2380"}},
		{ID: 7, Name: "", PeerURLs: []string{"http://127.0.0.7:2380"}},                   // another host's unstarted entry
		{ID: 9, Name: "", PeerURLs: []string{"http://127.0.0.2:2380", "http://h2:2380"}}, // ours, just added
	}
	got := initialCluster(members, 9, "node2")
	want := "node1=http://127.0.0.1:2380,node2=http://127.0.0.2:2380,node2=http://h2:2380,unstarted-7=http://127.0.0.7:2380"
	if got != want {
		t.Fatalf("InitialCluster =\n%s\nwant\n%s", got, want)
	}
}

func TestSettingsIgnoreBootstrapFlags(t *testing.T) {
	s, err := spec.Parse([]byte(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Lookup("a")
	before := settingsOf(s, a)
	if strings.Contains(before, "initial-cluster") {
		t.Fatalf("settings carry bootstrap flags: %s", before)
	}
	// Adding a member changes only --initial-cluster: no restart of a.
	s2, err := spec.Parse([]byte(`cluster: {name: c}
members:
  - {name: a, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: b, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
  - {name: c, peerURLs: [http://127.0.0.3:2380], clientURLs: [http://127.0.0.3:2379]}
etcd:
  flags: {}
`), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := s2.Lookup("a")
	if settingsOf(s2, a2) != before {
		t.Errorf("a scale-up changed member a's settings:\n%s\n%s", before, settingsOf(s2, a2))
	}
	// A changed etcd flag does.
	s2.Etcd.Flags = map[string]string{"snapshot-count": "5000"}
	if settingsOf(s2, a2) == before {
		t.Errorf("a changed etcd flag did not change the settings")
	}
}
