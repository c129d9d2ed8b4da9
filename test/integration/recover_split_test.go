package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// ackWriter puts keys through every member until stopped and keeps the
// keys etcd acknowledged.
type ackWriter struct {
	mu    sync.Mutex
	acked []string
	stop  chan struct{}
	done  chan struct{}
}

func startAckWriter(cli *clientv3.Client, prefix string) *ackWriter {
	w := &ackWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			key := fmt.Sprintf("%s/%06d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.Put(ctx, key, "v")
			cancel()
			if err == nil {
				w.mu.Lock()
				w.acked = append(w.acked, key)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *ackWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *ackWriter) Stop() []string {
	close(w.stop)
	<-w.done
	return w.acked
}

// TestRecoverSplitTwoTwo: four members, each in its own network
// namespace, agents reachable across hosts over mutual TLS
// (agent.recoveryAddr with the peer certificates). A steady writer has
// its writes acknowledged; then the network splits {node1,node2} |
// {node3,node4}: neither side has a quorum of 4. recover --from node1 on
// one side and --from node3 on the other must not both go on (here
// neither may: two of four are no majority). After the split heals, the
// cluster is the old one: the same member IDs, every acknowledged write
// there, no recovery journal on any host. Issue 20 / F1: on 8011516 both
// went ahead and forced two clusters.
func TestRecoverSplitTwoTwo(t *testing.T) {
	t.Parallel()
	if !testbed.RunIsolated(t) {
		return
	}
	c := testbed.NewOnNet(t, 4)
	pki := newClusterPKI(t)
	for _, m := range c.Members {
		pki.issue(t, m)
	}
	c.UseTLS(pki.clientTLS(t, true))
	c.Extra = pki.spec() + repairSpec
	c.AgentExtra = "  recoveryAddr: \":2377\"\n"
	c.WriteSpec()
	for _, m := range c.Members {
		c.Start(m.Name)
	}
	ids := c.WaitVoters(converge, c.AllNames()...)

	w := startAckWriter(c.Client(), "/acked")
	testbed.Eventually(t, converge, "100 acknowledged writes", func() string {
		if n := w.count(); n < 100 {
			return fmt.Sprintf("%d", n)
		}
		return ""
	})
	sides := [][]string{{"node1", "node2"}, {"node3", "node4"}}
	split := func(heal bool) {
		for i, side := range sides {
			var others []string
			for _, n := range sides[1-i] {
				others = append(others, c.Member(n).IP)
			}
			for _, n := range side {
				h := c.Member(n).Host
				err := h.Blackhole(others...)
				if heal {
					err = h.Unblackhole(others...)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	split(false)
	healed := false
	defer func() {
		if !healed {
			split(true)
		}
	}()
	// Both sides lose their leader; the writes stop being acknowledged.
	waitLeaderless(t, c, c.AllNames()...)

	went := 0
	for _, from := range []string{"node1", "node3"} {
		view := hostView(t, c, from, c.SpecText())
		bin, args := c.Member(from).Host.Command(testbed.Binary, "recover", "--config", view, "--name", from, "--from", from, "--yes", "--wait", "0")
		ctx, cancel := context.WithTimeout(context.Background(), converge)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		t.Logf("on %s: etcdkeeper recover --from %s --yes:\n%s", from, from, out)
		if err == nil {
			went++
			t.Errorf("recover --from %s went ahead with 2 of 4 members on its side", from)
			continue
		}
		if !strings.Contains(string(out), "recovery refused") || !strings.Contains(string(out), "not a majority") {
			t.Errorf("recover --from %s failed, but not with the majority refusal", from)
		}
	}
	if went > 1 {
		t.Fatalf("%d recoveries went ahead on the two sides of one split: two clusters", went)
	}
	for _, n := range c.AllNames() {
		if _, err := os.Stat(filepath.Join(c.StateDir(n), "recovery.json")); err == nil {
			t.Errorf("%s has a recovery journal after the refused recoveries", n)
		}
	}

	split(true)
	healed = true
	after := c.WaitVoters(converge, c.AllNames()...)
	acked := w.Stop()
	for _, n := range c.AllNames() {
		if after[n] != ids[n] {
			t.Errorf("%s is member %x after the split, was %x", n, after[n], ids[n])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client().Get(ctx, "/acked/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	lost := 0
	for _, k := range acked {
		if !have[k] {
			lost++
		}
	}
	t.Logf("%d writes acknowledged, %d keys after the split healed", len(acked), len(resp.Kvs))
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
	}
}
