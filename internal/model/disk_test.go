package model

import (
	"reflect"
	"testing"
	"time"
)

func TestSlowDisks(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	members := []Member{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 3, Name: "c"}, {ID: 4, Name: "d", IsLearner: true}}
	rec := func(id uint64, p99 time.Duration, sustained bool) AgentRecord {
		return AgentRecord{Name: members[id-1].Name, MemberID: id, Disk: &DiskLatency{WALFsyncP99: p99, Sustained: sustained}}
	}
	idle := func(id uint64) AgentRecord { return AgentRecord{Name: members[id-1].Name, MemberID: id} }
	cases := []struct {
		name string
		recs []AgentRecord
		want []uint64
	}{
		{"all fast", []AgentRecord{rec(1, ms(2), false), rec(2, ms(2), false), rec(3, ms(4), false)}, nil},
		{"one far slower, sustained", []AgentRecord{rec(1, ms(2), false), rec(2, ms(256), true), rec(3, ms(4), false)}, []uint64{2}},
		{"far slower, not sustained (a moment's hiccup)", []AgentRecord{rec(1, ms(2), false), rec(2, ms(256), false), rec(3, ms(4), false)}, nil},
		{"sustained but under the floor", []AgentRecord{rec(1, ms(1), false), rec(2, ms(8), true), rec(3, ms(1), false)}, nil},
		{"above the floor, but the others are about as slow", []AgentRecord{rec(1, ms(16), true), rec(2, ms(64), true), rec(3, ms(32), true)}, nil},
		{"exactly the ratio", []AgentRecord{rec(1, ms(4), false), rec(2, ms(20), true), rec(3, ms(4), false)}, []uint64{2}},
		{"no other measurement", []AgentRecord{rec(2, ms(200), true)}, nil},
		{"the others idle (no measurement)", []AgentRecord{idle(1), rec(2, ms(200), true), idle(3)}, nil},
		{"two of three slow: the faster other is the median", []AgentRecord{rec(1, ms(2), false), rec(2, ms(256), true), rec(3, ms(128), true)}, []uint64{2, 3}},
		{"a learner's agent does not count", []AgentRecord{rec(1, ms(2), false), rec(2, ms(2), false), rec(4, ms(300), true)}, nil},
		{"a record of no member", []AgentRecord{rec(1, ms(2), false), {Name: "x", MemberID: 9, Disk: &DiskLatency{WALFsyncP99: ms(300), Sustained: true}}}, nil},
		{"no disk in the records", []AgentRecord{idle(1), idle(2)}, nil},
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

func TestDiskBucket(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		0: 0, 80 * time.Microsecond: 125 * time.Microsecond, 300 * time.Microsecond: 500 * time.Microsecond,
		time.Millisecond: time.Millisecond, 1100 * time.Microsecond: 2 * time.Millisecond, 200 * time.Millisecond: 256 * time.Millisecond,
	} {
		if got := DiskBucket(d); got != want {
			t.Errorf("DiskBucket(%v) = %v, want %v", d, got, want)
		}
	}
}

func TestSlowDiskText(t *testing.T) {
	s := SlowDisk{Name: "node2", P99: 256 * time.Millisecond, Others: 4 * time.Millisecond}
	if got, want := s.Text(), "node2's disk is slow: WAL fsync p99 256ms, 64× the others' 4ms"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
