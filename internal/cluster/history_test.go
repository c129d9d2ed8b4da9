package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
)

// TestHistoryAppendKeepsTheLastN appends to a real etcd beyond the bound:
// the oldest go first, a repeated push adds nothing, and the read is
// oldest first.
func TestHistoryAppendKeepsTheLastN(t *testing.T) {
	ep := startEtcd(t)
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(i int) history.Event {
		return history.Event{Time: t0.Add(time.Duration(i) * time.Second), Host: "node1", Kind: "promote", MemberID: fmt.Sprintf("%x", i+1)}
	}
	const keep = 5
	for batch := range 3 {
		var evs []history.Event
		for i := range 3 {
			evs = append(evs, ev(batch*3+i))
		}
		if err := c.AppendHistory(ctx, "h", evs, keep); err != nil {
			t.Fatal(err)
		}
	}
	// The last batch again, as after a push whose answer was lost.
	if err := c.AppendHistory(ctx, "h", []history.Event{ev(6), ev(7), ev(8)}, keep); err != nil {
		t.Fatal(err)
	}
	got, err := c.History(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != keep {
		t.Fatalf("history holds %d events, want the last %d: %v", len(got), keep, got)
	}
	for i, e := range got {
		if want := ev(4 + i); e.ID() != want.ID() || e.MemberID != want.MemberID {
			t.Fatalf("event %d = %+v, want %+v", i, e, want)
		}
	}
	other, err := c.History(ctx, "other")
	if err != nil || len(other) != 0 {
		t.Fatalf("another cluster's history = %v, %v; want none", other, err)
	}
}
