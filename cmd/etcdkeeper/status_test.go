package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const statusSpec = `cluster: {name: demo}
members:
  - {name: node1, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: node2, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
  - {name: node3, peerURLs: [http://127.0.0.3:2380], clientURLs: [http://127.0.0.3:2379]}
`

// TestStatusTable renders a cluster that differs from the spec in every
// way status must show: a dead voter, a learner, a member the spec does
// not list, an unstarted entry and a spec member that is missing.
func TestStatusTable(t *testing.T) {
	s, err := spec.Parse([]byte(statusSpec), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v := cluster.View{ClusterID: 0xc1, LeaderID: 1, Members: []cluster.MemberView{
		{ID: 1, Name: "node1", ClientURLs: []string{"http://127.0.0.1:2379"}, Healthy: true, RaftTerm: 2, RaftIndex: 120, DBSize: 20480, Version: "3.7.3"},
		{ID: 2, Name: "node2", ClientURLs: []string{"http://127.0.0.2:2379"}, Err: "context deadline exceeded"},
		{ID: 4, Name: "node4", ClientURLs: []string{"http://127.0.0.4:2379"}, Healthy: true, RaftTerm: 2, RaftIndex: 120, DBSize: 20480, Version: "3.7.3"},
		{ID: 5, IsLearner: true},
	}}
	rows, converged, err := joinRows(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if converged {
		t.Errorf("a cluster with a dead voter, a learner and an extra member reported as converged")
	}
	addAgents(rows, []cluster.AgentRecord{{Name: "node1", Phase: "running"}, {Name: "node4", Phase: "running"}})
	var out bytes.Buffer
	if err := printRows(&out, rows, "table"); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("status table differs from %s:\n%s\nwant:\n%s", golden, out.String(), want)
	}
}

// TestStatusConverged: exactly the spec's members, all healthy voters.
func TestStatusConverged(t *testing.T) {
	s, err := spec.Parse([]byte(statusSpec), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ms []cluster.MemberView
	for i, m := range s.Members {
		ms = append(ms, cluster.MemberView{ID: uint64(i + 1), Name: m.Name, ClientURLs: m.ClientURLs, Healthy: true})
	}
	if _, converged, _ := joinRows(s, cluster.View{LeaderID: 1, Members: ms}); !converged {
		t.Errorf("a cluster that matches the spec is reported as differing")
	}
}
