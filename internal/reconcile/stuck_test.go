package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestDecideSilent covers the silent running etcd: how long it was silent,
// seen stopped, or still (no CPU time, no data written), and whether the
// others keep a quorum without it.
func TestDecideSilent(t *testing.T) {
	self := specMembers("node2")[0]
	// node2 itself is the silent one: unhealthy in the cluster's view.
	othersUp := healthyCluster("node1", "node2", "node3")
	othersUp.Members[1].Healthy = false
	oneUp := healthyCluster("node1", "node2", "node3")
	oneUp.Members[1].Healthy, oneUp.Members[2].Healthy = false, false
	for _, tc := range []struct {
		name    string
		l       model.Local
		cluster *model.Cluster
		want    ActionKind
		kill    bool
		reason  string
	}{
		{name: "silent a moment, stopped a moment",
			l:    model.Local{SilentFor: 3 * time.Second, StoppedFor: 2 * time.Second, StillFor: 2 * time.Second},
			want: DoWait, reason: "not answering yet"},
		{name: "stopped past the grace, peers keep a quorum: killed at once",
			l:       model.Local{SilentFor: 7 * time.Second, StoppedFor: 6 * time.Second, StillFor: 6 * time.Second},
			cluster: othersUp, want: DoStopStuck, kill: true, reason: "stopped process (state T: SIGSTOP) for 6s"},
		{name: "stopped, the cluster not observed: wait",
			l:    model.Local{SilentFor: 7 * time.Second, StoppedFor: 6 * time.Second},
			want: DoWait, reason: "no healthy quorum without it"},
		{name: "stopped, the others are no quorum without it: keep it",
			l:       model.Local{SilentFor: 7 * time.Second, StoppedFor: 6 * time.Second},
			cluster: oneUp, want: DoWait, reason: "no healthy quorum without it"},
		{name: "still (no CPU, no data) past its deadline: stopped, gracefully",
			l:       model.Local{SilentFor: 25 * time.Second, StillFor: StillDeadline + time.Second},
			cluster: othersUp, want: DoStopStuck, reason: "neither its CPU time nor its data dir moved for 21s"},
		{name: "still, the others are no quorum without it: keep it",
			l:       model.Local{SilentFor: 25 * time.Second, StillFor: StillDeadline + time.Second},
			cluster: oneUp, want: DoWait, reason: "no healthy quorum without it"},
		// A process in D has StillFor 0 (etcdproc.Stillness), and is not
		// stopped: SIGKILL acts only once its I/O returns.
		{name: "waiting on the disk (D), silent for a minute: wait",
			l:       model.Local{SilentFor: time.Minute, DiskSleep: true},
			cluster: othersUp, want: DoWait, reason: "not answering yet"},
		{name: "waiting on the disk (D) past ReadyDeadline: not stopped",
			l:       model.Local{SilentFor: ReadyDeadline + time.Second, DiskSleep: true},
			cluster: othersUp, want: DoWait, reason: "waits on its disk (process state D): not stopping it"},
		{name: "etcd refuses the agent's TLS handshake: say so",
			l:    model.Local{SilentFor: 3 * time.Second, HandshakeRefused: "etcd refused the agent's certificate (tls.agent): remote error: tls: certificate required"},
			want: DoWait, reason: "the TLS handshake fails: etcd refused the agent's certificate (tls.agent): remote error: tls: certificate required"},
		// It answers handshakes: it runs and serves, it is not stuck.
		{name: "TLS refused past ReadyDeadline, peers up: not stopped",
			l:       model.Local{SilentFor: ReadyDeadline + time.Second, HandshakeRefused: "etcd refused the agent's certificate"},
			cluster: othersUp, want: DoWait, reason: "the TLS handshake fails"},
		{name: "silent, working, past ReadyDeadline: stopped as before",
			l:       model.Local{SilentFor: ReadyDeadline + time.Second, StillFor: time.Second},
			cluster: othersUp, want: DoStopStuck, reason: "not answering for 1m31s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.Running = true
			got := Decide(Input{Self: self, InSpec: true, Desired: specMembers("node1", "node2", "node3"), Local: tc.l, Cluster: tc.cluster})
			if got.Kind != tc.want || got.Kill != tc.kill || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("got %s (kill %v) %q; want %s (kill %v) with %q", got.Kind, got.Kill, got.Reason, tc.want, tc.kill, tc.reason)
			}
			if tc.l.HandshakeRefused == "" && SilentTooLong(tc.l) != (tc.want == DoStopStuck || strings.Contains(tc.reason, "quorum") || strings.Contains(tc.reason, "disk")) {
				t.Errorf("SilentTooLong %v disagrees with the decision", SilentTooLong(tc.l))
			}
		})
	}
}
