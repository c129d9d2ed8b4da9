package model

import (
	"reflect"
	"testing"
	"time"
)

func TestSlowDisks(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	members := []Member{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 3, Name: "c"}, {ID: 4, Name: "d", IsLearner: true}}
	rec := func(id uint64, p99 time.Duration, fsyncs int64, above time.Duration) AgentRecord {
		return AgentRecord{Name: members[id-1].Name, MemberID: id, Disk: &DiskLatency{WALFsyncP99: p99, Fsyncs: fsyncs, AboveFor: above}}
	}
	long := 2 * SlowDiskFor
	cases := []struct {
		name string
		recs []AgentRecord
		want []uint64
	}{
		{"all fast", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(3), 100, 0), rec(3, ms(2), 100, 0)}, nil},
		{"one far slower, long enough", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(200), 100, long), rec(3, ms(3), 100, 0)}, []uint64{2}},
		{"not for long enough", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(200), 100, SlowDiskFor-time.Second), rec(3, ms(3), 100, 0)}, nil},
		{"slow but under the floor", []AgentRecord{rec(1, ms(1), 100, 0), rec(2, ms(9), 100, long), rec(3, ms(1), 100, 0)}, nil},
		{"above the floor, but the others are about as slow", []AgentRecord{rec(1, ms(20), 100, long), rec(2, ms(60), 100, long), rec(3, ms(25), 100, long)}, nil},
		{"exactly the ratio", []AgentRecord{rec(1, ms(4), 100, 0), rec(2, ms(20), 100, long), rec(3, ms(4), 100, 0)}, []uint64{2}},
		{"too few fsyncs to say", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(200), DiskMinFsyncs-1, long), rec(3, ms(3), 100, 0)}, nil},
		{"no other measurement", []AgentRecord{rec(2, ms(200), 100, long)}, nil},
		{"the others unmeasured (idle)", []AgentRecord{rec(1, 0, 0, 0), rec(2, ms(200), 100, long), rec(3, 0, 3, 0)}, nil},
		{"two of three slow: the faster other is the median", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(200), 100, long), rec(3, ms(150), 100, long)}, []uint64{2, 3}},
		{"a learner's agent does not count", []AgentRecord{rec(1, ms(2), 100, 0), rec(2, ms(3), 100, 0), rec(4, ms(300), 100, long)}, nil},
		{"a record of no member", []AgentRecord{rec(1, ms(2), 100, 0), {Name: "x", MemberID: 9, Disk: &DiskLatency{WALFsyncP99: ms(300), Fsyncs: 100, AboveFor: long}}}, nil},
		{"no disk in the records", []AgentRecord{{Name: "a", MemberID: 1}, {Name: "b", MemberID: 2}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			for _, s := range slowDisks(members, tc.recs, map[uint64]time.Duration{}) {
				got = append(got, s.ID)
				if s.P99 < SlowDiskFloor || s.Others <= 0 || s.Text() == "" {
					t.Errorf("slow disk %+v: figures missing", s)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("slow: %v, want %v", got, tc.want)
			}
			v := NewView(Cluster{Members: members}, tc.recs)
			for _, id := range tc.want {
				if _, ok := v.SlowDisk(id); !ok {
					t.Errorf("the view does not name member %d slow", id)
				}
			}
		})
	}
}

func TestViewLeaderPlaced(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	v := NewView(Cluster{Members: []Member{{ID: 1, Name: "a"}}}, []AgentRecord{{Name: "a", LeaderPlaced: t0}, {Name: "b", LeaderPlaced: t0.Add(time.Minute)}, {Name: "c"}})
	if !v.LeaderPlaced.Equal(t0.Add(time.Minute)) {
		t.Errorf("LeaderPlaced %v, want the latest of the records", v.LeaderPlaced)
	}
}

func TestSlowDiskText(t *testing.T) {
	s := SlowDisk{Name: "node2", P99: 210 * time.Millisecond, Others: 5 * time.Millisecond, For: 35 * time.Second}
	if got, want := s.Text(), "node2's disk is slow: WAL fsync p99 210ms, 42× the others' 5ms, for 35s"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
