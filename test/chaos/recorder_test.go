package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// scenario is one run's history as the checks see it: the clients'
// operations, what the recorder read, and what etcd holds at the end.
type scenario struct {
	ops []op
	rec recorded
	end etcdEnd
}

// compacted is a run whose NOSPACE procedure compacted at revision 10:
// etcd's history at the end starts there; the recorder read everything.
func compacted() scenario {
	return scenario{
		ops: []op{
			{Client: 1, Kind: "put", Key: "k", Value: "a", Call: 0, Return: 10, OK: true, Rev: 5},
			{Client: 2, Kind: "cas", Key: "k", Expect: "a", Value: "b", Call: 20, Return: 30, OK: true, Rev: 6},
			{Client: 1, Kind: "put", Key: "j", Value: "x", Call: 31, Return: 40, OK: true, Rev: 7},
			// NOSPACE: refused (before raft, or at apply under the alarm).
			{Client: 2, Kind: "put", Key: "k", Value: "z", Call: 41, Return: 45, Refused: true, Err: "etcdserver: mvcc: database space exceeded"},
			{Client: 3, Kind: "cas", Key: "j", Expect: "x", Value: "w", Call: 42, Return: 46, Refused: true, Err: "etcdserver: mvcc: database space exceeded"},
			// compaction at 10, disarm
			{Client: 1, Kind: "get", Key: "k", Call: 50, Return: 55, OK: true, Got: "b"},
			{Client: 1, Kind: "put", Key: "k", Value: "c", Call: 60, Return: 70, OK: true, Rev: 12},
			{Client: 2, Kind: "put", Key: "j", Value: "y", Call: 71, Return: 80, OK: true, Rev: 13},
			{Client: 3, Kind: "get", Key: "k", Call: 81, Return: 90, OK: true, Got: "c"},
		},
		rec: recorded{Writes: []etcdWrite{{"k", "a", 5}, {"k", "b", 6}, {"j", "x", 7}, {"k", "c", 12}, {"j", "y", 13}}, Next: 14},
		end: etcdEnd{From: 10, Tail: []etcdWrite{{"k", "c", 12}, {"j", "y", 13}}, Current: []etcdWrite{{"j", "y", 13}, {"k", "c", 12}}},
	}
}

// verdict runs the checks of the chaos run's end (chaos.check) in order
// on s: the recorder against etcd, the unknown and refused writes
// resolved by the recorder's history, no acknowledged write lost,
// linearizability.
func (s scenario) verdict() []string {
	out := historyProblems(s.rec, s.end)
	ops := slices.Clone(s.ops)
	resolveUnknown(ops, s.rec.Writes)
	out = append(out, lostWrites(ops, s.rec.Writes)...)
	if res := porcupine.CheckOperationsTimeout(kvModel, toPorcupine(ops), 0); res != porcupine.Ok {
		out = append(out, "not linearizable: "+string(res))
	}
	return out
}

// TestHistoryAcrossCompaction: a compaction (the NOSPACE procedure's)
// takes etcd's history before it away; the checks, reading the
// recorder's, accept it, and still flag a write lost, moved or reordered
// before or after it, and a revision the recorder missed. A write refused
// with NOSPACE is resolved by the history: one that happened took effect
// before its answer, one that did not never did.
func TestHistoryAcrossCompaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*scenario)
		want string // "" accepted; else a part of a problem
	}{
		{"compacted at 10, the recorder read every write", func(*scenario) {}, ""},
		{"nothing compacted: etcd's history from revision 1 is the recorder's", func(s *scenario) {
			s.end.From, s.end.Tail = 1, slices.Clone(s.rec.Writes)
		}, ""},
		{"an acknowledged write before the compaction is not in the recorder's history", func(s *scenario) {
			s.rec.Writes = slices.Delete(s.rec.Writes, 1, 2) // k=b at 6
		}, `cas k="b" acknowledged at revision 6 is not in etcd's history`},
		{"etcd lost a write after the compaction the recorder read", func(s *scenario) {
			s.end.Tail = s.end.Tail[1:]
			s.end.Current[1] = etcdWrite{"k", "b", 6}
		}, `the recorder read k="c" at revision 12, etcd's history has j="y" at revision 13`},
		{"etcd's history after the compaction has two writes swapped", func(s *scenario) {
			s.end.Tail = []etcdWrite{{"j", "y", 12}, {"k", "c", 13}}
			s.end.Current = []etcdWrite{{"j", "y", 12}, {"k", "c", 13}}
		}, `write 1 from revision 10: the recorder read k="c" at revision 12, etcd's history has j="y" at revision 12`},
		{"the cluster reordered two writes after the compaction (recorder and etcd agree)", func(s *scenario) {
			s.rec.Writes[3], s.rec.Writes[4] = etcdWrite{"j", "y", 12}, etcdWrite{"k", "c", 13}
			s.end.Tail = []etcdWrite{{"j", "y", 12}, {"k", "c", 13}}
			s.end.Current = []etcdWrite{{"j", "y", 12}, {"k", "c", 13}}
		}, `put k="c" acknowledged at revision 12 is in etcd's history at revision 13`},
		{"the recorder read writes out of revision order", func(s *scenario) {
			s.rec.Writes[1], s.rec.Writes[2] = s.rec.Writes[2], s.rec.Writes[1]
		}, `the recorder read k="b" at revision 6 after revision 7`},
		{"etcd has a write after the compaction the recorder never read", func(s *scenario) {
			s.end.Tail = append(s.end.Tail, etcdWrite{"k", "d", 14})
			s.end.Current[1] = etcdWrite{"k", "d", 14}
		}, `etcd's history has k="d" at revision 14, which the recorder never read`},
		{"a write refused with NOSPACE happened (it crossed the quota at apply) and a read sees it", func(s *scenario) {
			s.rec.Writes = slices.Insert(s.rec.Writes, 3, etcdWrite{"k", "z", 8})
			s.ops[5].Got = "z"
		}, ""},
		{"a write refused with NOSPACE happened, but a read after its answer does not see it", func(s *scenario) {
			s.rec.Writes = slices.Insert(s.rec.Writes, 3, etcdWrite{"k", "z", 8})
		}, "not linearizable"},
		{"a read returns the value of a write refused with NOSPACE that never happened", func(s *scenario) {
			s.ops[5].Got = "z"
		}, "not linearizable"},
		{"a read after the compaction returns a value overwritten before it", func(s *scenario) {
			s.ops[8].Got = "a"
		}, "not linearizable"},
		{"the key's current value is not its last write in the recorder's history", func(s *scenario) {
			s.end.Current[0] = etcdWrite{"j", "x", 7}
		}, `j is "x" at revision 7 in etcd, but the recorder's last write of it is "y" at revision 13`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := compacted()
			tc.edit(&s)
			got := s.verdict()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("flagged: %q", got)
			case tc.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }):
				t.Fatalf("want a problem with %q, got %q", tc.want, got)
			}
		})
	}
}

// TestRecorderGap: a compaction the recorder had not read up to is a
// gap, and the checks fail on it; events out of revision order and
// deletes are flagged as they are read.
func TestRecorderGap(t *testing.T) {
	r := &recorder{next: 1}
	put := func(k, v string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), ModRevision: rev}}
	}
	r.add([]*clientv3.Event{put("k", "a", 5), put("k", "b", 6)})
	r.gap(4) // a compaction below what it read: no gap
	if got := r.read(); len(got.Gaps) != 0 || got.Next != 7 {
		t.Fatalf("after reading to 6, a compaction at 4: %+v", got)
	}
	r.gap(10)
	r.add([]*clientv3.Event{put("k", "c", 12)})
	got := r.read()
	s := scenario{rec: got, end: etcdEnd{From: 10, Tail: []etcdWrite{{"k", "c", 12}}, Current: []etcdWrite{{"k", "c", 12}}}}
	if v := s.verdict(); !slices.ContainsFunc(v, func(p string) bool {
		return strings.Contains(p, "revisions 7 to 9 compacted before the recorder read them")
	}) {
		t.Fatalf("gap not flagged: %q", v)
	}
	r.add([]*clientv3.Event{put("k", "x", 11), {Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte("k"), ModRevision: 13}}})
	if odd := r.read().Odd; len(odd) != 2 {
		t.Fatalf("odd = %q, want the write at 11 after 12 and the delete", odd)
	}
}

// TestRecorderAcrossCompaction, with a real etcd: the recorder reads the
// clients' keys while other keys are written; its progress notices carry
// it past those writes, so a compaction at the current revision and a
// watch broken after it (as a member killed would) leave no gap. etcd's
// own history after the compaction is the recorder's, and the writes
// before it are still in the recorder's.
func TestRecorderAcrossCompaction(t *testing.T) {
	ep, _ := testetcd.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	r, err := startRecorder([]string{ep}, false, "/chaos/")
	if err != nil {
		t.Fatal(err)
	}
	defer r.halt(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	for i := 0; i < 5; i++ {
		put(fmt.Sprintf("/chaos/k%d", i), fmt.Sprintf("before-%d", i))
	}
	var rev int64
	for i := 0; i < 50; i++ {
		rev = put(fmt.Sprintf("/nospace/k%d", i), "filler")
	}
	waitFor(t, "the recorder's progress passes the filler's writes", func() string {
		if got := r.read(); got.Next <= rev {
			return fmt.Sprintf("next %d, filler up to %d (%d notices)", got.Next, rev, got.Notices)
		}
		return ""
	})
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	r.rewatch()
	waitFor(t, "the watch begun again", func() string {
		if r.read().Breaks == 0 {
			return "not yet"
		}
		return ""
	})
	for i := 0; i < 5; i++ {
		put(fmt.Sprintf("/chaos/k%d", i), fmt.Sprintf("after-%d", i))
	}
	if why := r.halt(30 * time.Second); why != "" {
		t.Fatal(why)
	}
	end, _, err := etcdHistory([]string{ep}, "/chaos/")
	if err != nil {
		t.Fatal(err)
	}
	if end.From != rev || len(end.Tail) != 5 {
		t.Fatalf("etcd's history from %d (want the compaction's %d): %v", end.From, rev, end.Tail)
	}
	rec := r.read()
	if p := historyProblems(rec, end); len(p) > 0 {
		t.Fatalf("problems: %q", p)
	}
	if len(rec.Writes) != 10 || rec.Writes[0].Value != "before-0" {
		t.Fatalf("the recorder read %v, want the 5 writes before the compaction and the 5 after", rec.Writes)
	}
}

// waitFor polls cond (every 50 ms, a minute at most) until it returns "".
func waitFor(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
