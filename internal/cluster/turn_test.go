package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestTurnKey: one host turn at a time: of hosts taking it at once, one
// gets it; a renewal or an end of a turn read before another write is
// refused (a release of a stale turn never deletes a renewed one).
func TestTurnKey(t *testing.T) {
	c, err := Dial([]string{startEtcd(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if got, err := c.GetTurn(ctx, "k"); err != nil || got != nil {
		t.Fatalf("GetTurn before any = %v, %v; want none", got, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]*model.HostTurn{}
	for _, name := range []string{"node1", "node2", "node3"} {
		wg.Go(func() {
			now := time.Now()
			got, err := c.TakeTurn(ctx, "k", model.HostTurn{ID: name, Member: name, Why: "guard: systemctl reboot", Since: now, Renewed: now})
			switch {
			case err == nil:
				mu.Lock()
				won[name] = got
				mu.Unlock()
			case !errors.Is(err, ErrTurnTaken):
				t.Errorf("%s: TakeTurn: %v", name, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d hosts took the turn at once, want 1: %v", len(won), won)
	}
	var held *model.HostTurn
	for _, h := range won {
		held = h
	}
	read, err := c.GetTurn(ctx, "k")
	if err != nil || read == nil || read.ID != held.ID || read.Revision != held.Revision {
		t.Fatalf("GetTurn = %+v, %v; want %+v", read, err, held)
	}
	renewed := *read
	renewed.Renewed = time.Now().Add(time.Second)
	after, err := c.RenewTurn(ctx, "k", renewed)
	if err != nil || after.Revision <= read.Revision {
		t.Fatalf("RenewTurn = %+v, %v", after, err)
	}
	if err := c.DeleteTurn(ctx, "k", *read); !errors.Is(err, ErrTurnTaken) {
		t.Fatalf("DeleteTurn of the turn as read before its renewal = %v, want ErrTurnTaken", err)
	}
	if _, err := c.RenewTurn(ctx, "k", *read); !errors.Is(err, ErrTurnTaken) {
		t.Fatalf("RenewTurn of a stale read = %v, want ErrTurnTaken", err)
	}
	if err := c.DeleteTurn(ctx, "k", *after); err != nil {
		t.Fatalf("DeleteTurn = %v", err)
	}
	if err := c.DeleteTurn(ctx, "k", *after); err != nil {
		t.Fatalf("DeleteTurn of a turn gone already = %v, want nil", err)
	}
	if got, err := c.GetTurn(ctx, "k"); err != nil || got != nil {
		t.Fatalf("GetTurn after the end = %v, %v; want none", got, err)
	}
}
