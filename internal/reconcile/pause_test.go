package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

var pauseNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func pauseFor(d time.Duration) *model.Pause {
	return &model.Pause{By: "root@node1", Reason: "replacing a disk", Since: pauseNow.Add(-time.Minute), Until: pauseNow.Add(d)}
}

// TestPaused: which of Decide's actions pass a pause, which become waits,
// and what the reason says.
func TestPaused(t *testing.T) {
	p := *pauseFor(time.Hour + 12*time.Minute)
	tests := []struct {
		name   string
		would  Action
		want   ActionKind
		reason string
	}{
		{"nothing passes, the pause said first", Action{Kind: DoNothing, Reason: "no action: node1 is a healthy voter", Key: "healthy-voter"},
			DoNothing, "paused by root@node1 for 1h12m more: replacing a disk; no action: node1 is a healthy voter"},
		{"a wait passes", Action{Kind: DoWait, Reason: "waiting: restart backoff after exit status 1 (unknown)", Key: "wait/backoff"},
			DoWait, "paused by root@node1 for 1h12m more: replacing a disk; waiting: restart backoff"},
		{"idle passes", Action{Kind: DoIdle, Reason: "idle: not in the spec"}, DoIdle, "; idle: not in the spec"},
		{"no data moved aside by an idle member", Action{Kind: DoIdle, Start: StartDecision{Action: ActIdle, MoveData: true}, Reason: "idle: removed from the cluster; moving its data aside"},
			DoWait, "would now: idle (idle: removed from the cluster; moving its data aside)"},
		{"its own member started as it is after a crash", Action{Kind: DoStart, Start: StartDecision{Action: ActStartAsIs}, Reason: "started etcd: healthy data: starting it as it is"},
			DoStart, "started etcd: healthy data"},
		{"a forced start as it is after a recovery's forced start passes (its data is kept)", Action{Kind: DoStart, Start: StartDecision{Action: ActStartAsIs}, Key: "recovery/start-forced", Reason: "recovery r1: starting it as it is, never forcing twice"},
			DoStart, "never forcing twice"},
		{"a new cluster is not started", Action{Kind: DoStart, Start: StartDecision{Action: ActStartNew}, Reason: "started etcd: forming the cluster from the spec"},
			DoWait, "replacing a disk; would now: start (started etcd: forming the cluster"},
		{"no rejoin", Action{Kind: DoRejoin, Reason: "rejoining: data is corrupt", Key: "start/rejoin/x"},
			DoWait, "would now: rejoin (rejoining: data is corrupt)"},
		{"no lock for a change", Action{Kind: DoTakeLock, Reason: "taking the cluster lock to rejoin: data is corrupt", Key: "lock/rejoin"},
			DoWait, "would now: taking the cluster lock to rejoin: data is corrupt"},
		{"no membership change", Action{Kind: DoChangeMembership, Reason: "changed membership: remove node3 (not in the spec)"},
			DoWait, "would now: change-membership"},
		{"no promotion", Action{Kind: DoPromote, Reason: "promoting learner 2"}, DoWait, "would now: promote"},
		{"a rejoin mid-way stays as it is", Action{Kind: DoFinishRejoin, Reason: "rejoin finished"}, DoWait, "would now: finish-rejoin"},
		{"no stop for repair", Action{Kind: DoStopForRepair, Reason: "etcd raised a CORRUPT alarm on member 2"}, DoWait, "would now: stop-for-repair"},
		{"no stop of a stuck etcd (the operator may have stopped it)", Action{Kind: DoStopStuck, Kill: true, Reason: "stopped process"}, DoWait, "would now: stop-stuck"},
		{"no restart for settings", Action{Kind: DoRestart, Reason: "restarting etcd to apply changed settings"}, DoWait, "would now: restart ("},
		{"no restart of a stalled publish", Action{Kind: DoRestartStalled}, DoWait, "would now: restart-stalled"},
		{"no disarm", Action{Kind: DoDisarm, Alarms: []model.Alarm{{MemberID: 9, Type: model.AlarmCorrupt}}, Reason: "disarm CORRUPT alarm of member 9"}, DoWait, "would now: disarm"},
		{"no recovery stop", Action{Kind: DoStopForRecovery}, DoWait, "would now: stop-for-recovery"},
		{"no forced start", Action{Kind: DoForceNewCluster}, DoWait, "would now: force-new-cluster"},
		{"no snapshot restore", Action{Kind: DoRestoreSnapshot}, DoWait, "would now: restore-snapshot"},
		{"no recovery finish", Action{Kind: DoFinishRecovery}, DoWait, "would now: finish-recovery"},
		{"no refusal written", Action{Kind: DoRefuseRecovery}, DoWait, "would now: refuse-recovery"},
		{"no fence taken", Action{Kind: DoAcceptFence}, DoWait, "would now: accept-fence"},
		{"no fence ended", Action{Kind: DoEndFence}, DoWait, "would now: end-fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Paused(p, pauseNow, tt.would)
			if got.Kind != tt.want {
				t.Fatalf("kind = %s, want %s (%s)", got.Kind, tt.want, got.Reason)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason = %q, want it to contain %q", got.Reason, tt.reason)
			}
			if got.Kind != tt.would.Kind && (!got.ReleaseLock || got.Alarms != nil || got.Kill) {
				t.Errorf("a held-back step must give the lock back and carry nothing to act on: %+v", got)
			}
			if got.Kind != DoStart && !strings.HasPrefix(got.Key, "paused/") {
				t.Errorf("key = %q: the decision while paused must be logged apart from the same one unpaused", got.Key)
			}
		})
	}
}

// TestDecidePaused runs the whole decision with a pause: a corrupt member
// is not repaired, a changed setting not applied, a healthy one restarted;
// an expired pause holds nothing.
func TestDecidePaused(t *testing.T) {
	desired := specMembers("node1", "node2", "node3")
	corrupt := model.Local{Data: model.Data{Kind: model.DataCorrupt, ClusterID: 0xc1, MemberID: 2, Reason: "wal: crc mismatch"},
		Marker: &model.Marker{ClusterID: 0xc1, MemberID: 2}, LockHeld: true}
	tests := []struct {
		name   string
		pause  *model.Pause
		local  model.Local
		want   ActionKind
		reason string
	}{
		{"corrupt data is not repaired", pauseFor(time.Hour), corrupt, DoWait, "paused by root@node1 for 1h more: replacing a disk; would now: rejoin (rejoining: "},
		{"nor is the lock taken for it", pauseFor(time.Hour), model.Local{Data: corrupt.Data, Marker: corrupt.Marker}, DoWait,
			"paused by root@node1 for 1h more: replacing a disk; would now: taking the cluster lock to rejoin: "},
		{"until resume", &model.Pause{By: "ops@laptop"}, corrupt, DoWait, "paused by ops@laptop until etcdkeeper resume; would now: rejoin"},
		{"a local pause says so", &model.Pause{By: "root@node2", Local: true}, corrupt, DoWait, "paused on this host by root@node2 until etcdkeeper resume; would now"},
		{"an expired pause holds nothing", pauseFor(-time.Second), corrupt, DoRejoin, "rejoining: "},
		{"healthy data is started as it is", pauseFor(time.Hour), model.Local{Data: model.Data{Kind: model.DataHealthy, ClusterID: 0xc1, MemberID: 2}}, DoStart, "starting it as it is"},
		{"changed settings wait", pauseFor(3 * time.Second),
			model.Local{Running: true, Answer: &model.Answer{MemberID: 2, ClusterID: 0xc1, Leader: 1}, Restart: model.Restart{Why: "changed settings"}, LockHeld: true},
			DoWait, "paused by root@node1 for 3s more: replacing a disk; would now: restart ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := healthyCluster("node1", "node2", "node3")
			if !tt.local.Running {
				c.Members[1].Healthy, c.Members[1].Err = false, "connection refused"
			}
			in := Input{Self: desired[1], InSpec: true, Desired: desired, Cluster: c,
				Local: tt.local, Memory: model.Memory{RolloutSnapshot: ": changed settings"}, Pause: tt.pause, Now: pauseNow}
			got := Decide(in)
			if got.Kind != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("Decide = %s %q, want %s containing %q", got.Kind, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestApprox(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour + 12*time.Minute + 20*time.Second: "1h12m",
		2 * time.Hour:           "2h",
		3 * time.Second:         "3s",
		90 * time.Second:        "1m30s",
		5 * time.Minute:         "5m",
		2900 * time.Millisecond: "3s",
		100 * time.Millisecond:  "<1s",
	} {
		if got := Approx(d); got != want {
			t.Errorf("Approx(%s) = %q, want %q", d, got, want)
		}
	}
}
