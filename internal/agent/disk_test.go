package agent

import (
	"math"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// fsyncs is a cumulative WAL fsync histogram: fast ones under 1 ms, slow
// ones between 128 and 256 ms.
func fsyncs(fast, slow uint64) model.Histogram {
	return model.Histogram{Bounds: []float64{0.001, 0.128, 0.256, math.Inf(1)}, Counts: []uint64{fast, fast, fast + slow, fast + slow}, Count: fast + slow}
}

func TestDiskMeter(t *testing.T) {
	var m diskMeter
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	if d := m.add(at(0), fsyncs(100000, 5000), model.Histogram{}); d.Fsyncs != 0 || d.AboveFor != 0 {
		t.Fatalf("the first reading says something: %+v (its history may be days old)", d)
	}
	// 5 s of fast writes.
	d := m.add(at(5), fsyncs(100500, 5000), model.Histogram{})
	if d.Fsyncs != 500 || d.WALFsyncP99 >= time.Millisecond || d.AboveFor != 0 {
		t.Fatalf("fast window: %+v", d)
	}
	// The disk slows: every fsync from now on takes 128-256 ms.
	fast, slow := uint64(100500), uint64(5000)
	var aboveAt time.Time
	for s := 10; s <= 60; s += 5 {
		slow += 20
		d = m.add(at(s), fsyncs(fast, slow), model.Histogram{})
		if d.WALFsyncP99 < model.SlowDiskFloor {
			t.Fatalf("at %ds p99 %v with slow fsyncs in the window", s, d.WALFsyncP99)
		}
		if aboveAt.IsZero() {
			aboveAt = at(s)
		}
		if want := at(s).Sub(aboveAt); d.AboveFor != want {
			t.Fatalf("at %ds above for %v, want %v", s, d.AboveFor, want)
		}
	}
	// The window is the last 30 s at most: 6 readings of 20 slow fsyncs.
	if d.Fsyncs != 120 {
		t.Errorf("window of %d fsyncs, want 120 (30 s)", d.Fsyncs)
	}
	// Fast again: once the slow fsyncs leave the window, the clock stops.
	for s := 65; s <= 100; s += 5 {
		fast += 500
		d = m.add(at(s), fsyncs(fast, slow), model.Histogram{})
	}
	if d.WALFsyncP99 >= model.SlowDiskFloor || d.AboveFor != 0 {
		t.Errorf("fast again: %+v", d)
	}
	// An idle window says nothing and stops the clock.
	slow += 5
	d = m.add(at(105), fsyncs(fast, slow), model.Histogram{})
	if d.AboveFor != 0 {
		t.Errorf("%d fsyncs count as slow for %v", d.Fsyncs, d.AboveFor)
	}
	// etcd restarted: its counters begin again, and are the window.
	d = m.add(at(110), fsyncs(40, 0), model.Histogram{})
	if d.Fsyncs != 40 {
		t.Errorf("after a restart: %+v", d)
	}
}

func TestStatusLineNamesSlowDisk(t *testing.T) {
	st := Status{Member: "node1", Phase: model.PhaseRunning, Role: "leader", Healthy: true, Voters: 3, HealthyVoters: 3, LeaderName: "node1",
		SlowDisks: []model.SlowDisk{{ID: 2, Name: "node2", P99: 212 * time.Millisecond, Others: 3 * time.Millisecond, For: time.Minute}}}
	if got, want := statusLineOf(st), "node1: leader, healthy; leader node1; 3/3 healthy; SLOW DISK node2 (WAL fsync p99 212ms)"; got != want {
		t.Errorf("STATUS %q, want %q", got, want)
	}
}
