package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestUpgradeRules covers the rules of a restart onto a new agent binary
// (upgrade.go): the preflight of its embedded etcd before the old agent
// stops anything, the same preflight before a start, and the end of the
// step in the new process (caught up first, then the lock passes on).
func TestUpgradeRules(t *testing.T) {
	three := []string{"node1", "node2", "node3"}
	old := model.Build{Version: "0.4.0", EtcdVersion: "3.7.3"}
	newer := func(etcd string) *model.Build { return &model.Build{Version: "0.5.0", EtcdVersion: etcd} }
	why := "etcdkeeper 0.4.0 (etcd 3.7.3) → 0.5.0 (etcd 3.7.3)"
	due := model.Restart{Why: why, Agent: true}
	follower := &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}
	on := func(v string) memberMod { return func(m *model.Member) { m.Version = v } }
	cluster37 := clusterWith(three, map[uint64]memberMod{1: on("3.7.3"), 2: on("3.7.3"), 3: on("3.7.3")})
	cluster37.Version = "3.7.0"
	stopped3 := clusterWith(three, map[uint64]memberMod{1: on("3.7.3"), 2: func(m *model.Member) { m.Healthy, m.Err = false, "connection refused" }, 3: on("3.7.3")})
	stopped3.Version = "3.7.0"
	placeholder := clusterWith(three, map[uint64]memberMod{1: on("3.7.3"), 2: func(m *model.Member) { m.Healthy, m.Err = false, "connection refused" }, 3: on("3.7.3")})
	placeholder.Version = "3.0.0"
	single := healthyCluster("node2")
	single.Version, single.Members[0].Version = "3.7.0", "3.7.3"
	healthyData := model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}
	upgraded := &model.Upgraded{From: old, To: *newer("3.7.3"), Lock: true}
	tests := []struct {
		name    string
		local   model.Local
		mem     model.Memory
		cluster *model.Cluster
		want    ActionKind
		reason  string
		release bool
	}{
		{name: "a new binary with the same etcd minor: the rolling restart proceeds",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true, Binary: model.Binary{Running: old, Installed: newer("3.7.4")}}, mem: model.Memory{RolloutSnapshot: "g2: " + why},
			cluster: cluster37, want: DoRestart, reason: "restarting the agent and its etcd of member 2"},
		{name: "one minor up: proceeds",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true, Binary: model.Binary{Running: old, Installed: newer("3.8.0")}}, mem: model.Memory{RolloutSnapshot: "g2: " + why},
			cluster: cluster37, want: DoRestart, reason: "restarting the agent"},
		{name: "two minors up: refused before anything stops, the old binary keeps running",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true, Binary: model.Binary{Running: old, Installed: newer("3.9.0")}},
			cluster: cluster37, want: DoWait,
			reason:  "not restarting onto the installed etcdkeeper 0.5.0 (etcd 3.9.0): etcd 3.9.0 is more than one minor ahead of the cluster version 3.7: etcd upgrades one minor at a time; roll to 3.8.x first; etcdkeeper 0.4.0 (etcd 3.7.3) keeps running",
			release: true},
		{name: "two minors up in a one-member cluster: refused too (nobody else to keep serving)",
			local:   model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true, Binary: model.Binary{Running: old, Installed: newer("3.9.0")}},
			cluster: single, want: DoWait, reason: "not restarting onto the installed etcdkeeper 0.5.0 (etcd 3.9.0)", release: true},
		{name: "two minors down: refused",
			local:   model.Local{Running: true, Answer: follower, Restart: due, Binary: model.Binary{Running: old, Installed: newer("3.5.26")}},
			cluster: cluster37, want: DoWait, reason: "etcd 3.5.26 is more than one minor below the cluster version 3.7", release: true},
		{name: "one minor down: etcd's downgrade first, through the rule's etcd preflight",
			local:   model.Local{Running: true, Answer: follower, Restart: model.Restart{Why: why, Agent: true, EtcdFrom: "3.7.3", EtcdTo: "3.6.16"}, Binary: model.Binary{Running: old, Installed: newer("3.6.16")}},
			cluster: cluster37, want: DoTakeLock, reason: "enable etcd's downgrade to 3.6"},
		{name: "etcd.binary in the spec: the embedded etcd is not what runs, not judged",
			local: model.Local{Running: true, Answer: follower, Restart: due, LockHeld: true, Binary: model.Binary{Running: old, Installed: newer("3.9.0"), External: true}}, mem: model.Memory{RolloutSnapshot: "g2: " + why},
			cluster: cluster37, want: DoRestart, reason: "restarting the agent"},
		{name: "a stopped member whose start would run an etcd the cluster refuses: not started",
			local:   model.Local{Data: healthyData, Binary: model.Binary{Running: *newer("3.9.0")}, LockHeld: true},
			cluster: stopped3, want: DoWait, reason: "not starting the member: etcd 3.9.0 is more than one minor ahead of the cluster version 3.7", release: true},
		{name: "an old agent whose etcd exited after the file was replaced: the new file's etcd is judged",
			local:   model.Local{Data: healthyData, Binary: model.Binary{Running: old, Installed: newer("3.6.0")}},
			cluster: stopped3, want: DoWait, reason: "not starting the member: etcd 3.6.0 is a downgrade of the cluster version 3.7.0, and etcd's downgrade to 3.6 is not enabled", release: true},
		{name: "a cluster just formed reports etcd's placeholder cluster version 3.0.0: judged by what its members run",
			local:   model.Local{Data: healthyData, Binary: model.Binary{Running: old}},
			cluster: placeholder, want: DoStart, reason: "starting it as it is"},
		{name: "the placeholder does not hide a refusal",
			local:   model.Local{Data: healthyData, Binary: model.Binary{Running: *newer("3.9.0")}},
			cluster: placeholder, want: DoWait, reason: "more than one minor ahead of the cluster version 3.7", release: true},
		{name: "a stopped member with an allowed etcd starts as it is",
			local:   model.Local{Data: healthyData, Binary: model.Binary{Running: *newer("3.8.0")}},
			cluster: stopped3, want: DoStart, reason: "starting it as it is"},
		{name: "the new process, its member behind: waits, keeping the lock",
			local: model.Local{Running: true, Answer: follower, LockHeld: true, Upgraded: upgraded}, mem: model.Memory{Restarted: true},
			cluster: clusterWith(three, map[uint64]memberMod{2: lagging}),
			want:    DoWait, reason: "restarted onto etcdkeeper 0.5.0 (etcd 3.7.3), catching up (keeping the cluster lock until it has caught up): node2 is catching up"},
		{name: "the new process without the lock (its lease ran out): still waits, and says the next member waits",
			local:   model.Local{Running: true, Answer: follower, Upgraded: &model.Upgraded{From: old, To: *newer("3.7.3")}},
			cluster: clusterWith(three, map[uint64]memberMod{2: lagging}),
			want:    DoWait, reason: "the next member waits until it has caught up"},
		{name: "the new process, no view: waits",
			local: model.Local{Running: true, Answer: follower, LockHeld: true, Upgraded: upgraded}, mem: model.Memory{Restarted: true},
			want: DoWait, reason: "cannot observe the cluster"},
		{name: "the new process, caught up: the journal closes, the lock passes on",
			local: model.Local{Running: true, Answer: follower, LockHeld: true, Upgraded: upgraded}, mem: model.Memory{Restarted: true},
			cluster: healthyCluster(three...),
			want:    DoFinishUpgrade, reason: "restarted onto etcdkeeper 0.5.0 (etcd 3.7.3): node2 is a caught-up healthy voter again (was 0.4.0 (etcd 3.7.3))", release: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Self: specMembers("node2")[0], InSpec: true, Desired: specMembers(three...), Generation: "g2",
				Local: tt.local, Memory: tt.mem, Cluster: tt.cluster, Now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) || got.ReleaseLock != tt.release {
				t.Fatalf("Decide = %s %q (release lock %v), want %s containing %q (release lock %v)",
					got.Kind, got.Reason, got.ReleaseLock, tt.want, tt.reason, tt.release)
			}
		})
	}
}
