package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestPauseKey: the pause written is the one read back; resume returns it
// and leaves none; a pause with an end goes by itself with its lease.
func TestPauseKey(t *testing.T) {
	c, err := Dial([]string{startEtcd(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if p, err := c.GetPause(ctx, "k"); err != nil || p != nil {
		t.Fatalf("GetPause before any = %v, %v; want none", p, err)
	}
	since := time.Now().Truncate(time.Second)
	want := model.Pause{By: "root@node1", Reason: "replacing a disk", Since: since}
	if err := c.PutPause(ctx, "k", want); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetPause(ctx, "k")
	if err != nil || got == nil || got.By != want.By || got.Reason != want.Reason || !got.Since.Equal(since) || !got.Until.IsZero() || got.Revision == 0 {
		t.Fatalf("GetPause = %+v, %v; want %+v", got, err, want)
	}
	gone, err := c.DeletePause(ctx, "k")
	if err != nil || gone == nil || gone.By != want.By {
		t.Fatalf("DeletePause = %+v, %v; want the pause it removed", gone, err)
	}
	if again, err := c.DeletePause(ctx, "k"); err != nil || again != nil {
		t.Fatalf("a second DeletePause = %+v, %v; want none", again, err)
	}

	// 5 s: the read right after the write must find the key before its
	// lease runs out, on a loaded machine too (with 2 s, a stall of the
	// two calls of 2 s would have read nothing).
	timed := model.Pause{By: "root@node1", Since: time.Now(), Until: time.Now().Add(5 * time.Second)}
	if err := c.PutPause(ctx, "k", timed); err != nil {
		t.Fatal(err)
	}
	if p, err := c.GetPause(ctx, "k"); err != nil || p == nil || p.Until.IsZero() {
		t.Fatalf("GetPause of a timed pause = %+v, %v", p, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.GetPause(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pause's key outlived its lease: %+v", p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
