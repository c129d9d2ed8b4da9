package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// noDefragSpec: nothing defragments but the test.
const noDefragSpec = "maintenance:\n  defrag:\n    enabled: false\n"

// healthWatch follows one member's gRPC health (grpc.health.v1 Watch, the
// whole server: service ""), as a health-checking client's connection
// does.
type healthWatch struct {
	mu   sync.Mutex
	seen []healthpb.HealthCheckResponse_ServingStatus
	news chan struct{}
}

func watchHealth(t *testing.T, endpoint string) *healthWatch {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h := &healthWatch{news: make(chan struct{}, 1)}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.seen = append(h.seen, resp.Status)
			h.mu.Unlock()
			select {
			case h.news <- struct{}{}:
			default:
			}
		}
	}()
	return h
}

// waitFor waits until the status seen last is s; "" when it is, else why
// not (done closed first, or the deadline).
func (h *healthWatch) waitFor(s healthpb.HealthCheckResponse_ServingStatus, done <-chan struct{}) string {
	deadline := time.After(converge)
	for {
		h.mu.Lock()
		n := len(h.seen)
		last := healthpb.HealthCheckResponse_UNKNOWN
		if n > 0 {
			last = h.seen[n-1]
		}
		h.mu.Unlock()
		if last == s {
			return ""
		}
		select {
		case <-h.news:
		case <-done:
			return fmt.Sprintf("the defragmentation returned while the member's health was %s (seen: %v)", last, h.statuses())
		case <-deadline:
			return fmt.Sprintf("health %s after %s, want %s", last, converge, s)
		}
	}
}

func (h *healthWatch) statuses() []healthpb.HealthCheckResponse_ServingStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]healthpb.HealthCheckResponse_ServingStatus(nil), h.seen...)
}

// duringDefrag is what a client's puts did while one member was
// defragmented: the puts were issued one after the other once that
// member's health said NOT_SERVING.
type duringDefrag struct {
	before int            // puts that completed before the Defragment call returned
	by     map[uint64]int // which member answered them, by member ID
	// after: which member answered the puts that completed only after
	// the Defragment call returned (held by the member defragmented, or
	// only slow on a loaded machine).
	after map[uint64]int
	// timedOut: puts that etcd gave up on (request timed out): held by
	// the member defragmented.
	timedOut int
	seen     []healthpb.HealthCheckResponse_ServingStatus
	// firstHeld: the first put completed only after the Defragment call
	// returned.
	firstHeld bool
}

// putsDuringDefrag defragments target and, once its health says
// NOT_SERVING, issues n puts through cli one after another. It returns
// why the attempt says nothing ("" when it does): the defragmentation
// returned before the test saw NOT_SERVING (a loaded machine's health
// stream lags a short defragmentation).
func putsDuringDefrag(t *testing.T, c *testbed.Cluster, target string, cli *clientv3.Client, n int) (duringDefrag, string) {
	t.Helper()
	ep := c.Member(target).ClientURL()
	h := watchHealth(t, ep)
	if why := h.waitFor(healthpb.HealthCheckResponse_SERVING, nil); why != "" {
		t.Fatalf("%s before its defragmentation: %s", target, why)
	}
	done := make(chan struct{})
	var derr error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, derr = c.Client(target).Defragment(ctx, ep)
	}()
	if why := h.waitFor(healthpb.HealthCheckResponse_NOT_SERVING, done); why != "" {
		<-done
		if derr != nil {
			t.Fatalf("defragment %s: %v", target, derr)
		}
		return duringDefrag{}, fmt.Sprintf("%s while defragmented: %s", target, why)
	}
	// The client's own health stream learns NOT_SERVING a moment after
	// the test's: on a loaded machine that moment is long enough for a
	// put to be routed to the member before it does.
	time.Sleep(defragGrace)
	select {
	case <-done:
		return duringDefrag{}, fmt.Sprintf("%s's defragmentation returned within %s of NOT_SERVING", target, defragGrace)
	default:
	}
	out := duringDefrag{by: map[uint64]int{}, after: map[uint64]int{}}
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		resp, err := cli.Put(ctx, fmt.Sprintf("during/%d", i), "v")
		cancel()
		if errors.Is(err, rpctypes.ErrTimeout) {
			// Held by the member defragmented past etcd's own request
			// timeout (a long defragmentation on a loaded machine): a put
			// that did not complete while it was defragmented.
			t.Logf("put %d while %s is defragmented: %v", i, target, err)
			out.timedOut++
			continue
		}
		if err != nil {
			<-done // the next attempt or subtest must not begin beside it
			t.Fatalf("put %d while %s is defragmented: %v", i, target, err)
		}
		select {
		case <-done:
			if i == 0 {
				out.firstHeld = true
			}
			out.after[resp.Header.MemberId]++
		default:
			out.before++
			out.by[resp.Header.MemberId]++
		}
	}
	<-done
	if derr != nil {
		t.Fatalf("defragment %s: %v", target, derr)
	}
	if why := h.waitFor(healthpb.HealthCheckResponse_SERVING, nil); why != "" {
		t.Errorf("%s after its defragmentation: %s", target, why)
	}
	out.seen = h.statuses()
	return out, ""
}

// defragAttempts bounds the attempts of a measurement that says nothing
// (see putsDuringDefrag and TestDefragHealth).
const defragAttempts = 6

// defragGrace is how long after the test saw NOT_SERVING the puts begin.
const defragGrace = 300 * time.Millisecond

// measureDuringDefrag repeats putsDuringDefrag until an attempt says
// something: inconclusive(got) names why one does not.
func measureDuringDefrag(t *testing.T, c *testbed.Cluster, target string, cli *clientv3.Client, n int, inconclusive func(duringDefrag) string) duringDefrag {
	t.Helper()
	for attempt := 1; ; attempt++ {
		got, why := putsDuringDefrag(t, c, target, cli, n)
		if why == "" {
			why = inconclusive(got)
		}
		if why == "" {
			return got
		}
		if attempt == defragAttempts {
			t.Fatalf("%d attempts said nothing; the last: %s", attempt, why)
		}
		t.Logf("attempt %d says nothing (%s): again", attempt, why)
	}
}

// TestDefragHealth: three members as the agents start them (the feature
// gate StopGRPCServiceOnDefrag on by default), with ~160 MB of keys, so
// that a defragmentation takes long enough to watch. A follower's gRPC
// health says SERVING, NOT_SERVING while it is defragmented, and SERVING
// again after. A client of that follower and another member issues 10
// puts one after the other once the follower said NOT_SERVING: a plain
// clientv3 (round robin) sends every other one to the follower, which
// soon holds one until the defragmentation ends, so fewer than 10
// complete before the Defragment call returns; a client with
// cluster.HealthChecking (the agents' own) completes all 10 before it
// returns. (Which member answered is logged, not asserted: a put sent in
// the instant before the client learns NOT_SERVING may reach the
// follower before its backend is locked.)
func TestDefragHealth(t *testing.T) {
	t.Parallel()
	c := testbed.New(t, 3)
	c.Extra = noDefragSpec
	c.WriteSpec()
	startAll(c)
	c.WaitVoters(converge, c.AllNames()...)
	fill(t, c.Client(), "keep/", 160<<20)
	o := allAnswered(t, c)
	var target, other string
	for _, m := range o.Voters() {
		switch {
		case m.ID == o.Leader():
		case target == "":
			target = m.Name
		default:
			other = m.Name
		}
	}
	db, _ := o.ByName(target)
	t.Logf("defragmenting follower %s (db %d MB); the clients use %s and %s", target, db.DBSize>>20, target, other)
	eps := []string{c.Member(target).ClientURL(), c.Member(other).ClientURL()}
	const n = 10

	t.Run("plain client", func(t *testing.T) {
		cli := newClient(t, eps)
		got := measureDuringDefrag(t, c, target, cli, n, func(duringDefrag) string { return "" })
		t.Logf("health %v; %d of %d puts completed before the Defragment call returned (answered by %s)", got.seen, got.before, n, byName(o, got.by))
		checkHealthSequence(t, got.seen)
		if got.before >= n {
			t.Errorf("all %d puts completed while %s was defragmented: round robin should have sent one to it, held until the end", n, target)
		}
	})
	t.Run("health-checking client", func(t *testing.T) {
		cli := newClient(t, eps, cluster.HealthChecking()...)
		// The client's own health stream may learn NOT_SERVING a moment
		// after the test's: a first put held then says nothing about the
		// client. One held after a put that went elsewhere does.
		targetID := o.ID(target)
		got := measureDuringDefrag(t, c, target, cli, n, func(got duringDefrag) string {
			switch {
			case got.firstHeld:
				return "the first put was sent before the client learned NOT_SERVING"
			case got.before < n && got.after[targetID] == 0 && got.timedOut == 0:
				// Every put went to the other member; the defragmentation
				// was only over before they were.
				return fmt.Sprintf("%d of %d puts, all answered by the other member, were not done when the defragmentation ended", n-got.before, n)
			}
			return ""
		})
		t.Logf("health %v; %d of %d puts completed before the Defragment call returned (answered by %s)", got.seen, got.before, n, byName(o, got.by))
		checkHealthSequence(t, got.seen)
		if got.before < n {
			t.Errorf("%d of %d puts issued after %s said NOT_SERVING completed before its Defragment call returned: want all", got.before, n, target)
		}
	})
}

func byName(o testbed.Observation, by map[uint64]int) string {
	var parts []string
	for id, k := range by {
		m, _ := o.ByID(id)
		parts = append(parts, fmt.Sprintf("%s ×%d", m.Name, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// checkHealthSequence: SERVING, then NOT_SERVING, then SERVING again.
func checkHealthSequence(t *testing.T, seen []healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	want := []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING}
	// A repeated status is the same state said again, not a change.
	if fmt.Sprint(slices.Compact(slices.Clone(seen))) != fmt.Sprint(want) {
		t.Errorf("health seen %v, want %v", seen, want)
	}
}

func newClient(t *testing.T, eps []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), DialOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fill writes about bytes of 256 KiB values under prefix, 4 at a time.
func fill(t *testing.T, cli *clientv3.Client, prefix string, bytes int) {
	t.Helper()
	value := strings.Repeat("x", 256<<10)
	n := bytes / len(value)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s%05d", prefix, i), value)
				cancel()
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("filling: %v", err)
	}
}

// TestDefragHealthExternalBinary: the gate reaches a real etcd 3.6.16 and
// 3.7.3 binary (etcd.binary): each starts with the agent's default
// --feature-gates (on its command line; it refuses a gate it does not
// know) and, defragmented,
// logs its health as NOT_SERVING ("defrag is active"), which it does only
// with StopGRPCServiceOnDefrag on (etcdserver/api/v3rpc/health.go).
func TestDefragHealthExternalBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two etcd binaries")
	}
	for _, version := range []string{"v3.6.16", "v3.7.3"} {
		t.Run(version, func(t *testing.T) {
			bin := testbed.EtcdBinary(t, version)
			c := testbed.New(t, 1)
			c.Extra = noDefragSpec
			c.WriteHostSpec("node1", strings.Replace(c.SpecText(), "etcd:\n", "etcd:\n  binary: "+bin+"\n", 1))
			startAll(c)
			c.WaitVoters(converge, "node1")
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.EtcdPID("node1")))
			if err != nil {
				t.Fatal(err)
			}
			if args := strings.Split(string(cmdline), "\x00"); !slices.ContainsFunc(args, func(a string) bool {
				return strings.HasPrefix(a, "--feature-gates=") && strings.Contains(a, "StopGRPCServiceOnDefrag=true")
			}) || args[0] != bin {
				t.Errorf("etcd runs as %q: want %s with StopGRPCServiceOnDefrag=true in --feature-gates", args, bin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := c.Client().Defragment(ctx, c.Member("node1").ClientURL()); err != nil {
				t.Fatal(err)
			}
			testbed.Eventually(t, converge, "etcd "+version+" logs NOT_SERVING while defragmented", func() string {
				if c.LogContains("node1", "grpc service status changed", "NOT_SERVING", "defrag is active") {
					return ""
				}
				return "no such line in node1's log"
			})
		})
	}
}
