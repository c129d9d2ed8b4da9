package reconcile

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func TestRolloutText(t *testing.T) {
	up := "etcd 3.6.16 → 3.7.3"
	c := model.Cluster{LeaderID: 1, Version: "3.6.0"}
	tests := []struct {
		name string
		c    model.Cluster
		recs []model.AgentRecord
		want string
	}{
		{"no rollout", c, []model.AgentRecord{{Name: "node1", MemberID: 1}, {Name: "node2", MemberID: 2}}, ""},
		{"one done, one restarting, the leader last", c, []model.AgentRecord{
			{Name: "node1", MemberID: 1, RestartPending: up, Phase: "waiting"},
			{Name: "node3", MemberID: 3, Phase: "starting"},
			{Name: "node2", MemberID: 2, Phase: "running", EtcdVersion: "3.7.3"},
		}, "rolling etcd 3.6.16 → 3.7.3: node1 (leader) last, node2 done (etcd 3.7.3), node3 restarting"},
		{"held on a member that did not come back", c, []model.AgentRecord{
			{Name: "node1", MemberID: 1, RestartPending: up},
			{Name: "node2", MemberID: 2, RestartPending: up, Rollout: &model.RolloutNote{Held: true, HeldOn: "node3 is not a healthy voter"}},
			{Name: "node3", MemberID: 3, Phase: "waiting"},
		}, "rolling etcd 3.6.16 → 3.7.3: node1 (leader) last, node2 held: node3 is not a healthy voter, node3 done"},
		{"a decision's wording says nothing: only the typed note does", c, []model.AgentRecord{
			{Name: "node1", MemberID: 1, RestartPending: up},
			{Name: "node2", MemberID: 2, RestartPending: up, Decision: "waiting: rollout held: node3 is not a healthy voter"},
			{Name: "node3", MemberID: 3, Decision: "waiting: restarted onto etcdkeeper 0.5.0 (etcd 3.7.3), catching up"},
		}, "rolling etcd 3.6.16 → 3.7.3: node1 (leader) last, node2 pending, node3 done"},
		{"a new agent binary: one on it, one restarted onto it and catching up, the leader last", c, []model.AgentRecord{
			{Name: "node1", MemberID: 1, RestartPending: "etcdkeeper 0.4.0 (etcd 3.7.3) → 0.5.0 (etcd 3.7.3)", RestartAgent: true, Version: "0.4.0"},
			{Name: "node2", MemberID: 2, Version: "0.5.0", EtcdVersion: "3.7.3", Phase: "running"},
			{Name: "node3", MemberID: 3, Version: "0.5.0", EtcdVersion: "3.7.3", Phase: "running", Rollout: &model.RolloutNote{CatchingUp: true}},
		}, "rolling etcdkeeper 0.4.0 (etcd 3.7.3) → 0.5.0 (etcd 3.7.3): node1 (leader) last, node2 on 0.5.0 (etcd 3.7.3), node3 restarted onto 0.5.0 (etcd 3.7.3), catching up"},
		{"a downgrade enabled", model.Cluster{LeaderID: 1, Version: "3.6.0", DowngradeTarget: "3.6"}, []model.AgentRecord{
			{Name: "node1", MemberID: 1, RestartPending: "etcd 3.7.3 → 3.6.16"},
			{Name: "node2", MemberID: 2, RestartPending: "etcd 3.7.3 → 3.6.16"},
		}, "etcd's downgrade to 3.6 is enabled (cluster version 3.6.0); rolling etcd 3.7.3 → 3.6.16: node1 (leader) last, node2 pending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RolloutText(tt.c, tt.recs); got != tt.want {
				t.Errorf("RolloutText =\n %q\nwant\n %q", got, tt.want)
			}
		})
	}
}

// TestPreflightErrors: plan's preflight, a FILE:LINE error naming the
// versions.
func TestPreflightErrors(t *testing.T) {
	s := &spec.Spec{Path: "/etc/etcdkeeper/cluster.yaml", Etcd: spec.Etcd{Binary: "/opt/etcd-3.7.3/etcd", Line: 12}}
	obs := func(cluster, member string) model.Cluster {
		return model.Cluster{Version: cluster, Members: []model.Member{{Version: member}, {Version: member}}}
	}
	ver := func(v string) spec.Version { out, _ := spec.ParseVersion(v); return out }
	tests := []struct {
		name string
		obs  model.Cluster
		want spec.Version
		out  string
	}{
		{"one minor up", obs("3.6.0", "3.6.16"), ver("3.7.3"), ""},
		{"two minors up", obs("3.5.0", "3.5.26"), ver("3.7.3"),
			"/etc/etcdkeeper/cluster.yaml:12: etcd.binary: refused: etcd 3.7.3 is more than one minor ahead of the cluster version 3.5"},
		{"3.5.21 to 3.6", obs("3.5.0", "3.5.21"), ver("3.6.16"),
			"/etc/etcdkeeper/cluster.yaml:12: etcd.binary: refused: etcd 3.6.16: a member runs etcd 3.5.21, below 3.5.26"},
		{"one minor down", obs("3.7.0", "3.7.3"), ver("3.6.16"),
			"/etc/etcdkeeper/cluster.yaml:12: etcd.binary: etcd 3.6.16 is a downgrade of the cluster version 3.7.0: the agents enable etcd's downgrade"},
		{"no cluster version", obs("", "3.7.3"), ver("3.7.3"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PreflightErrors(s, tt.obs, tt.want)
			if tt.out == "" && len(got) > 0 || tt.out != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.out)) {
				t.Fatalf("PreflightErrors = %q, want %q", got, tt.out)
			}
		})
	}
}
