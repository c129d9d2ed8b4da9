package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStateDirWriteReported: a state-dir file that cannot be written
// makes the agent not ready, leads its STATUS line and sets the gauge
// the EtcdkeeperStateDirNotWritable alert reads; the next good write of
// that file clears it, a good write of another one does not.
func TestStateDirWriteReported(t *testing.T) {
	a := newTestAgent(t, "", nil)
	a.setDecision("no action: a is a healthy voter", nil)
	a.updateStatus(func(s *Status) { s.Healthy = true })
	if ok, why := a.Ready(); !ok {
		t.Fatalf("not ready before any failed write: %s", why)
	}
	full := errors.New("write /var/lib/etcdkeeper/member.json: no space left on device")
	if err := a.noteWrite(markerFile, full); !errors.Is(err, full) {
		t.Fatalf("noteWrite returned %v, want the write's error", err)
	}
	_ = a.noteWrite(journalFile, nil)
	ok, why := a.Ready()
	if ok || !strings.Contains(why, "the state dir cannot be written: "+full.Error()) {
		t.Errorf("Ready = %v %q, want not ready with the write's error", ok, why)
	}
	if line := a.statusLine(); !strings.HasPrefix(line, "a: STATE DIR NOT WRITABLE (") || !strings.Contains(line, "no action: a is a healthy voter") {
		t.Errorf("STATUS line %q", line)
	}
	if g := testutil.ToFloat64(a.metrics.StateDirWritable); g != 0 {
		t.Errorf("etcdkeeper_state_dir_writable = %v, want 0", g)
	}
	_ = a.noteWrite(markerFile, nil)
	if ok, why := a.Ready(); !ok {
		t.Errorf("still not ready after the marker was written: %s", why)
	}
	if g := testutil.ToFloat64(a.metrics.StateDirWritable); g != 1 {
		t.Errorf("etcdkeeper_state_dir_writable = %v after the write, want 1", g)
	}
}
