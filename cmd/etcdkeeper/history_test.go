package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
)

var historyEvents = []history.Event{
	{Time: time.Date(2026, 12, 1, 19, 33, 32, 46e6, time.UTC), Host: "node2", Kind: "remove", MemberID: "ab424f6bd229b22",
		Reason: "data is corrupt: walpb: crc mismatch", Detail: map[string]string{"rejoin": "20261201T193332.046311282Z"}},
	{Time: time.Date(2026, 12, 1, 19, 33, 35, 0, time.UTC), Host: "node2", Kind: "promote", MemberID: "78f00a4915abe7f0", Reason: "the learner caught up with the leader"},
	{Time: time.Date(2026, 12, 1, 19, 40, 0, 0, time.UTC), Host: "node1", Kind: "remove", Member: "node4", MemberID: "5d3a1f2e", Reason: "node4 is not in the spec"},
	{Time: time.Date(2026, 12, 1, 19, 41, 0, 0, time.UTC), Host: "node1", Kind: "repair-done", MemberID: "78f00a4915abe7f0", Reason: "data is corrupt: walpb: crc mismatch",
		Detail: map[string]string{"snapshot": "/var/lib/etcdkeeper/snapshots/x.db", "backup": "/var/lib/etcd/.etcdkeeper-backups/x-etcd"}},
}

// TestHistoryTable: the table's columns (member name and ID, details
// sorted by key, a dash for none), against testdata/history.golden.
func TestHistoryTable(t *testing.T) {
	var out bytes.Buffer
	if err := printHistory(&out, historyEvents, "table", time.UTC); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "history.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("history table differs from %s:\n%s\nwant:\n%s", golden, out.String(), want)
	}
}

// TestHistoryJSON: -o json is the events as recorded; none is [].
func TestHistoryJSON(t *testing.T) {
	for _, evs := range [][]history.Event{historyEvents, nil} {
		var out bytes.Buffer
		if err := printHistory(&out, evs, "json", time.UTC); err != nil {
			t.Fatal(err)
		}
		var got []history.Event
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got == nil || len(got) != len(evs) {
			t.Fatalf("-o json = %s (%v), want %d events", out.String(), err, len(evs))
		}
		for i := range got {
			if got[i].ID() != evs[i].ID() || got[i].Detail["backup"] != evs[i].Detail["backup"] {
				t.Errorf("event %d = %+v, want %+v", i, got[i], evs[i])
			}
		}
	}
}
