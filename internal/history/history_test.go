package history

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func ev(sec int, host, kind string) Event {
	return Event{Time: t0.Add(time.Duration(sec) * time.Second), Host: host, Kind: kind}
}

func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Host+"/"+e.Kind)
	}
	return out
}

func TestMerge(t *testing.T) {
	cases := []struct {
		name  string
		lists [][]Event
		want  []string
	}{
		{"empty", nil, nil},
		{"one list kept in order", [][]Event{{ev(1, "a", "remove"), ev(2, "a", "add-learner")}}, []string{"a/remove", "a/add-learner"}},
		{"cluster and mirror overlap: each event once",
			[][]Event{{ev(1, "a", "remove"), ev(2, "a", "add-learner")}, {ev(2, "a", "add-learner"), ev(3, "a", "promote")}},
			[]string{"a/remove", "a/add-learner", "a/promote"}},
		{"mirrors of two hosts interleave by time",
			[][]Event{{ev(1, "a", "remove"), ev(4, "a", "promote")}, {ev(2, "b", "recovery-forced"), ev(3, "b", "recovery-done")}},
			[]string{"a/remove", "b/recovery-forced", "b/recovery-done", "a/promote"}},
		{"same time, two hosts: both kept",
			[][]Event{{ev(1, "a", "promote")}, {ev(1, "b", "promote")}},
			[]string{"a/promote", "b/promote"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := kinds(Merge(c.lists...)); !slices.Equal(got, c.want) {
				t.Fatalf("Merge = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSince(t *testing.T) {
	evs := []Event{ev(1, "a", "x"), ev(2, "a", "y"), ev(3, "a", "z")}
	cases := []struct {
		since time.Time
		want  int
	}{{time.Time{}, 3}, {t0.Add(2 * time.Second), 2}, {t0.Add(time.Hour), 0}}
	for _, c := range cases {
		if got := Since(evs, c.since); len(got) != c.want {
			t.Errorf("Since(%v) = %v, want %d events", c.since, kinds(got), c.want)
		}
	}
}

func TestMirrorKeepsTheLastN(t *testing.T) {
	m := NewMirror(filepath.Join(t.TempDir(), FileName), 3)
	for i := range 5 {
		if err := m.Append(ev(i, "a", string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Events()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/c", "a/d", "a/e"}; !slices.Equal(kinds(got), want) {
		t.Fatalf("mirror = %v, want %v", kinds(got), want)
	}
}

func TestMirrorPendingUntilPushed(t *testing.T) {
	m := NewMirror(filepath.Join(t.TempDir(), FileName), Keep)
	for i := range MaxPush + 5 {
		e := ev(i, "a", "promote")
		e.MemberID = HexID(uint64(i + 1))
		if err := m.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != MaxPush || !p[0].Time.Equal(t0) {
		t.Fatalf("pending = %d events from %v, want the oldest %d", len(p), p[0].Time, MaxPush)
	}
	if err := m.MarkPushed(p); err != nil {
		t.Fatal(err)
	}
	p, err = m.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 5 || !p[0].Time.Equal(t0.Add(MaxPush*time.Second)) {
		t.Fatalf("pending after the push = %v, want the last 5", p)
	}
	all, err := m.Events()
	if err != nil || len(all) != MaxPush+5 {
		t.Fatalf("events = %d, %v; want every event kept after the push", len(all), err)
	}
}

func TestMirrorSkipsLinesThatDoNotParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	m := NewMirror(path, Keep)
	if err := m.Append(ev(1, "a", "remove")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("{half a line\n")
	_ = f.Close()
	if err := m.Append(ev(2, "a", "promote")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/remove", "a/promote"}; !slices.Equal(kinds(got), want) {
		t.Fatalf("events = %v, want %v", kinds(got), want)
	}
}

func TestReadFileMissing(t *testing.T) {
	got, err := ReadFile(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadFile(missing) = %v, %v; want nothing, no error", got, err)
	}
}

func TestMirrorSkipsRepeats(t *testing.T) {
	failed := func(sec int, err string) Event {
		e := ev(sec, "a", "repair-failed")
		e.Reason, e.Detail = "data is corrupt", map[string]string{"error": err}
		return e
	}
	cases := []struct {
		name string
		evs  []Event
		want int
	}{
		{"the same failure on every pass", []Event{failed(0, "unhealthy cluster"), failed(5, "unhealthy cluster"), failed(10, "unhealthy cluster")}, 1},
		{"another error", []Event{failed(0, "unhealthy cluster"), failed(5, "no leader")}, 2},
		{"the same again after the window", []Event{failed(0, "x"), failed(int(RepeatWindow/time.Second), "x")}, 2},
		{"the same after another event", []Event{failed(0, "x"), ev(1, "a", "promote"), failed(2, "x")}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMirror(filepath.Join(t.TempDir(), FileName), Keep)
			for _, e := range c.evs {
				if err := m.Append(e); err != nil {
					t.Fatal(err)
				}
			}
			got, err := m.Events()
			if err != nil || len(got) != c.want {
				t.Fatalf("mirror = %v, %v; want %d events", kinds(got), err, c.want)
			}
		})
	}
}

// BenchmarkMirrorAppendFull: one event appended to a full mirror (Keep
// events), as every event of a long-running agent is: the whole file is
// read and replaced.
func BenchmarkMirrorAppendFull(b *testing.B) {
	m := NewMirror(filepath.Join(b.TempDir(), FileName), Keep)
	e := ev(0, "node1", "repair-done")
	e.Reason, e.Detail = "data is corrupt: WAL: reading snapshot records: walpb: crc mismatch", map[string]string{"backup": "/var/lib/etcd/.etcdkeeper-backups/2026-12-01T19-33-32.077Z-etcd"}
	for i := range Keep {
		e.Time = t0.Add(time.Duration(i) * time.Second)
		if err := m.Append(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		e.Time = t0.Add(time.Duration(Keep+i) * time.Second)
		if err := m.Append(e); err != nil {
			b.Fatal(err)
		}
	}
}
