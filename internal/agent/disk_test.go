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
	if d, pub := m.add(at(0), fsyncs(100000, 5000), model.Histogram{}); d.Fsyncs != 0 || pub != nil {
		t.Fatalf("the first reading says something: %+v %+v (its history may be days old)", d, pub)
	}
	// 5 s of fast writes: too few for a window that says anything.
	d, pub := m.add(at(5), fsyncs(100040, 5000), model.Histogram{})
	if d.Fsyncs != 40 || pub != nil {
		t.Fatalf("40 fsyncs: %+v, published %+v", d, pub)
	}
	fast, slow := uint64(100040), uint64(5000)
	for s := 10; s <= 30; s += 5 {
		fast += 500
		d, pub = m.add(at(s), fsyncs(fast, slow), model.Histogram{})
	}
	if pub == nil || pub.Sustained || pub.WALFsyncP99 > time.Millisecond || d.AboveFor != 0 {
		t.Fatalf("fast window: %+v, published %+v", d, pub)
	}
	// The disk slows: every fsync from now on takes 128-256 ms.
	var aboveAt time.Time
	for s := 35; s <= 80; s += 5 {
		slow += 20
		d, pub = m.add(at(s), fsyncs(fast, slow), model.Histogram{})
		if aboveAt.IsZero() {
			aboveAt = at(s - 5) // the reading covers the 5 s before it
		}
		if want := at(s).Sub(aboveAt); d.AboveFor != want {
			t.Fatalf("at %ds above for %v, want %v", s, d.AboveFor, want)
		}
		if want := d.AboveFor >= model.SlowDiskFor && d.WALFsyncP99 >= model.SlowDiskFloor; pub == nil || pub.Sustained != want {
			t.Fatalf("at %ds: %+v published %+v, want sustained %v", s, d, pub, want)
		}
	}
	if pub.WALFsyncP99 != 256*time.Millisecond {
		t.Errorf("published p99 %v, want its bucket 256ms", pub.WALFsyncP99)
	}
	// Fast again: the next fast reading stops the clock.
	fast += 500
	d, pub = m.add(at(85), fsyncs(fast, slow), model.Histogram{})
	if d.AboveFor != 0 || pub.Sustained {
		t.Errorf("fast again: %+v, published %+v", d, pub)
	}
	// A gap (etcd down, a long pass): the window and the hold start over.
	if d, pub = m.add(at(200), fsyncs(fast+500, slow+20), model.Histogram{}); pub != nil || d.Fsyncs != 0 {
		t.Errorf("after a gap: %+v, published %+v", d, pub)
	}
	// etcd restarted: its counters begin again, and are the reading.
	d, _ = m.add(at(205), fsyncs(40, 0), model.Histogram{})
	if d.Fsyncs != 40 {
		t.Errorf("after a restart: %+v", d)
	}
}

// TestDiskMeterOneSlowFsync: an idle cluster's window holds a few fsyncs,
// and one slow one is its p99 for 30 s: no slow disk (review 2).
func TestDiskMeterOneSlowFsync(t *testing.T) {
	var m diskMeter
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	fast, slow := uint64(1000), uint64(0)
	for s := 0; s <= 120; s += 5 {
		fast += 3
		if s == 30 {
			slow++
		}
		d, pub := m.add(t0.Add(time.Duration(s)*time.Second), fsyncs(fast, slow), model.Histogram{})
		if pub != nil && pub.Sustained {
			t.Fatalf("at %ds one slow fsync among %d makes a sustained slow disk: %+v", s, d.Fsyncs, d)
		}
	}
	// Busier: 300 fsyncs a reading, one of them slow now and then.
	for s := 125; s <= 300; s += 5 {
		fast += 300
		if s%20 == 0 {
			slow++
		}
		d, pub := m.add(t0.Add(time.Duration(s)*time.Second), fsyncs(fast, slow), model.Histogram{})
		if pub != nil && pub.Sustained {
			t.Fatalf("at %ds a slow fsync in 1200 makes a sustained slow disk: %+v", s, d)
		}
	}
}

func TestStatusLineNamesSlowDisk(t *testing.T) {
	st := Status{Member: "node1", Phase: model.PhaseRunning, Role: "leader", Healthy: true, Voters: 3, HealthyVoters: 3, LeaderName: "node1",
		SlowDisks: []model.SlowDisk{{ID: 2, Name: "node2", P99: 212 * time.Millisecond, Others: 3 * time.Millisecond}}}
	if got, want := statusLineOf(st), "node1: leader, healthy; leader node1; 3/3 healthy; SLOW DISK node2 (WAL fsync p99 212ms)"; got != want {
		t.Errorf("STATUS %q, want %q", got, want)
	}
}
