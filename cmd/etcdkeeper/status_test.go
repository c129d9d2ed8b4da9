package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const statusSpec = `cluster: {name: demo}
members:
  - {name: node1, peerURLs: [http://127.0.0.1:2380], clientURLs: [http://127.0.0.1:2379]}
  - {name: node2, peerURLs: [http://127.0.0.2:2380], clientURLs: [http://127.0.0.2:2379]}
  - {name: node3, peerURLs: [http://127.0.0.3:2380], clientURLs: [http://127.0.0.3:2379], leader: prefer}
`

// TestStatusTable renders a cluster that differs from the spec in every
// way status must show: a dead voter, a learner, a member the spec does
// not list, an unstarted entry and a spec member that is missing.
func TestStatusTable(t *testing.T) {
	s, err := spec.Parse([]byte(statusSpec), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v := model.Cluster{ClusterID: 0xc1, LeaderID: 1, Members: []model.Member{
		{ID: 1, Name: "node1", PeerURLs: []string{"http://127.0.0.1:2380"}, ClientURLs: []string{"http://127.0.0.1:2379"}, Healthy: true, RaftTerm: 2, RaftIndex: 120, DBSize: 20480, Version: "3.7.3"},
		{ID: 2, Name: "node2", PeerURLs: []string{"http://127.0.0.2:2380"}, ClientURLs: []string{"http://127.0.0.2:2379"}, Err: "context deadline exceeded"},
		{ID: 4, Name: "node4", PeerURLs: []string{"http://127.0.0.4:2380"}, ClientURLs: []string{"http://127.0.0.4:2379"}, Healthy: true, RaftTerm: 2, RaftIndex: 120, DBSize: 20480, Version: "3.7.3"},
		{ID: 5, IsLearner: true, PeerURLs: []string{"http://127.0.0.9:2380"}},
	}}
	rows, converged, err := joinRows(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if converged {
		t.Errorf("a cluster with a dead voter, a learner and an extra member reported as converged")
	}
	recs := []model.AgentRecord{
		{Name: "node1", Phase: "running", MemberID: 1, Disk: &model.DiskLatency{WALFsyncP99: 256 * time.Millisecond, Sustained: true}},
		{Name: "node4", Phase: "running", MemberID: 4, Disk: &model.DiskLatency{WALFsyncP99: 4 * time.Millisecond}}}
	addAgents(rows, recs)
	var out bytes.Buffer
	lines := addDisks(rows, s, model.NewView(v, recs))
	if err := printRows(&out, rows, "table"); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		fmt.Fprintln(&out, l)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fmt.Fprintln(&out, certSummary([]memberCert{
		{"node1", certs.Expiry{File: certs.File{Kind: "peer", Path: "/etc/etcd/node1-peer.crt"}, NotAfter: now.Add(200 * 24 * time.Hour)}},
		{"node2", certs.Expiry{File: certs.File{Kind: "client", Path: "/etc/etcd/node2.crt"}, NotAfter: now.Add(12*24*time.Hour + time.Hour)}},
		{"node1", certs.Expiry{File: certs.File{Kind: "ca", Path: "/etc/etcd/ca.crt"}, NotAfter: now.Add(3650 * 24 * time.Hour)}},
		{"node3", certs.Expiry{File: certs.File{Kind: "client", Path: "/etc/etcd/node3.crt"}, Err: errors.New("permission denied")}},
	}, now))
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
	var ms []model.Member
	for i, m := range s.Members {
		ms = append(ms, model.Member{ID: uint64(i + 1), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Healthy: true})
	}
	if _, converged, _ := joinRows(s, model.Cluster{LeaderID: 1, Members: ms}); !converged {
		t.Errorf("a cluster that matches the spec is reported as differing")
	}
}

// TestStatusAgreesWithPlan: an unstarted entry with a spec member's peer
// URLs is that member, not an extra one — for status as for plan.
func TestStatusAgreesWithPlan(t *testing.T) {
	s, err := spec.Parse([]byte(statusSpec), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v := model.Cluster{LeaderID: 1, Members: []model.Member{
		{ID: 1, Name: "node1", PeerURLs: []string{"http://127.0.0.1:2380"}, ClientURLs: []string{"http://127.0.0.1:2379"}, Healthy: true},
		{ID: 2, Name: "node2", PeerURLs: []string{"http://127.0.0.2:2380"}, ClientURLs: []string{"http://127.0.0.2:2379"}, Healthy: true},
		{ID: 3, PeerURLs: []string{"http://127.0.0.3:2380"}, IsLearner: true},
	}}
	rows, converged, err := joinRows(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if converged {
		t.Errorf("an unstarted member reported as converged")
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s/%s/inspec=%v", r.Name, r.Role, r.InSpec))
	}
	want := "node1/leader/inspec=true node2/voter/inspec=true node3/unstarted/inspec=true"
	if strings.Join(got, " ") != want {
		t.Errorf("rows = %s, want %s", strings.Join(got, " "), want)
	}
	if step := reconcile.Plan(s.Members, v, reconcile.Options{}); step.Kind != reconcile.StepWait || !strings.Contains(step.Reason, "node3 added but not started") {
		t.Errorf("plan = %s %q, want a wait for node3's agent", step.Kind, step.Reason)
	}
}

// TestStatusMaintenance: status says which agent runs a maintenance and
// what the agents' rule does next, or why it waits.
func TestStatusMaintenance(t *testing.T) {
	s, err := spec.Parse([]byte(statusSpec+"maintenance:\n  defrag:\n    window: \"Sat 02:00-05:00 UTC\"\n"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mem := func(id uint64, name string, size, inUse int64) model.Member {
		return model.Member{ID: id, Name: name, ClientURLs: []string{"http://" + name}, Healthy: true, CaughtUp: true, DBSize: size, DBSizeInUse: inUse}
	}
	tuesday := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := model.Cluster{LeaderID: 1, Now: tuesday, Members: []model.Member{mem(1, "node1", 1<<30, 1<<29), mem(2, "node2", 1<<30, 100<<20), mem(3, "node3", 1<<30, 1<<29)}}
	got := strings.Join(maintenanceLines(s, v, []model.AgentRecord{{Name: "node1", Maintenance: "defragmenting node3 since 12:00:00, deadline 2m0s"}}), "\n")
	for _, want := range []string{
		"maintenance running: agent node1 is defragmenting node3 since 12:00:00, deadline 2m0s",
		"maintenance pending: defrag node2 waits: outside the window Sat 02:00-05:00 UTC",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
