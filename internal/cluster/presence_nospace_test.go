package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// fillToNoSpace puts 256 KiB values until etcd raises NOSPACE (a member
// started with a small quota-backend-bytes).
func fillToNoSpace(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	big := strings.Repeat("x", 256<<10)
	for i := 0; ; i++ {
		if _, err := cli.Put(ctx, "/fill/"+string(rune('a'+i%26))+time.Now().Format("150405.000000"), big); err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("fill: %v", err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("no NOSPACE after 1000 puts of 256 KiB")
		}
	}
}

// TestPresenceHoldsOffUnderNoSpace: under NOSPACE etcd refuses the
// agent's record, and each refused put is still a raft entry and a
// warning in every member's log. After one refusal the record waits
// (noSpaceBackoff) while its lease is still kept alive.
func TestPresenceHoldsOffUnderNoSpace(t *testing.T) {
	ep, _ := testetcd.StartWith(t, func(cfg *embed.Config) { cfg.QuotaBackendBytes = 4 << 20 })
	c, err := Dial([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli, _ := c.conn()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := c.NewPresence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fillToNoSpace(ctx, t, cli)
	rec := func(n int) model.AgentRecord { return model.AgentRecord{Name: "a", Decision: strings.Repeat("d", n)} }
	if err := p.Publish(ctx, "t", rec(1)); err == nil {
		t.Fatal("a record published under NOSPACE")
	}
	index := func() uint64 {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		return st.RaftIndex
	}
	before := index()
	for n := 2; n < 6; n++ {
		if err := p.Publish(ctx, "t", rec(n)); err != nil {
			t.Errorf("publish %d under NOSPACE after a refusal: %v, want it held off quietly", n, err)
		}
	}
	if after := index(); after != before {
		t.Errorf("the raft index went from %d to %d: refused records were proposed again", before, after)
	}
	p.refreshed = time.Time{} // due for its keepalive
	if err := p.Publish(ctx, "t", rec(9)); err != nil {
		t.Errorf("publish while held off: %v", err)
	}
	if ttl, err := cli.TimeToLive(ctx, p.lease); err != nil || ttl.TTL <= 0 {
		t.Errorf("the record's lease under NOSPACE: ttl %v, %v: want it kept alive", ttl, err)
	}
}
