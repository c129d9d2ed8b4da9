package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// frozenDisk mounts a fresh ext4 image (a loop device) and returns its
// mount point and functions that freeze it (fsfreeze: every write blocks,
// as on a disk that hangs) and thaw it; it is thawed before the test's
// etcds are closed. It skips where that cannot be done (not root, no
// loop devices).
func frozenDisk(t *testing.T) (dir string, freeze, thaw func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "fsfreeze", "mount", "umount", "truncate"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	base := t.TempDir()
	img := filepath.Join(base, "disk.img")
	dir = filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("truncate", "-s", "256M", img).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount here: %v: %s", err, out)
	}
	// Registered first, so it runs last: after the etcd on it is closed.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	frozen := false
	thaw = func() {
		if frozen {
			_ = exec.Command("fsfreeze", "--unfreeze", dir).Run()
			frozen = false
		}
	}
	freeze = func() {
		if out, err := exec.Command("fsfreeze", "--freeze", dir).CombinedOutput(); err != nil {
			t.Fatalf("fsfreeze: %v: %s", err, out)
		}
		if !frozen {
			// Runs before the cluster is closed: its etcd can then
			// finish the writes it is stuck in and stop.
			t.Cleanup(thaw)
		}
		frozen = true
	}
	return dir, freeze, thaw
}

// TestObserveFrozenDiskNotCaughtUp: a member whose disk hangs keeps
// answering its status with its last leader (etcd's Status reads from
// memory), so it is Healthy, as the plain rule says; but its index stops
// while the others commit, and Observe must not count it as caught up:
// a restart of another member would leave writes waiting on it (F4b of
// the 2026-12-01 review).
func TestObserveFrozenDiskNotCaughtUp(t *testing.T) {
	dir, freeze, thaw := frozenDisk(t)
	nodes := testetcd.StartCluster(t, []testetcd.Node{
		{Name: "node1", Host: "127.0.0.1"}, {Name: "node2", Host: "127.0.0.2"}, {Name: "node3", Host: "127.0.0.3", Dir: filepath.Join(dir, "etcd")},
	}, nil)
	c, err := Dial([]string{nodes[0].ClientURL, nodes[1].ClientURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := observeUntil(t, c, "a leader and three healthy members", func(v model.Cluster) bool {
		return v.LeaderID != 0 && model.NewView(v, nil).Serving == 3
	})
	ids := map[string]uint64{}
	for _, m := range v.Members {
		ids[m.Name] = m.ID
	}
	notLeading(t, c, v, nodes[2].ClientURL, ids["node3"], ids["node1"])
	v = freezeFollower(t, c, c, ids["node3"], freeze, thaw)
	m3, _ := v.Member(ids["node3"])
	t.Logf("node3: healthy %v, index %d, behind %d, rising %v, caught up %v (%s)", m3.Healthy, m3.RaftIndex, m3.Behind, m3.Rising, m3.CaughtUp, m3.Lag)
	if !m3.Healthy {
		t.Fatalf("the frozen member does not look healthy (%s): the test shows nothing", m3.Err)
	}
	if m3.CaughtUp || m3.Behind == 0 || !strings.Contains(m3.Lag, "node3 is not catching up") {
		t.Errorf("frozen node3 counted as caught up: behind %d, caught up %v, %q", m3.Behind, m3.CaughtUp, m3.Lag)
	}
	if ok, _ := model.NewView(v, nil).ServesWithout(ids["node1"]); !ok {
		t.Errorf("the plain rule refuses to stop node1 too: the test shows nothing")
	}
	if ok, detail := model.NewView(v, nil).ReadyToStop(ids["node1"]); ok {
		t.Errorf("stopping node1 allowed with node3 frozen: %s", detail)
	}

	// Far behind: past the bound, whatever it did since.
	put(t, c, int(model.CatchUpBound(0))+100)
	v = observe(t, c)
	m3, _ = v.Member(ids["node3"])
	if m3.CaughtUp || !strings.Contains(m3.Lag, "behind the leader") || m3.Behind <= model.CatchUpBound(0) {
		t.Errorf("node3 %d behind: caught up %v, %q", m3.Behind, m3.CaughtUp, m3.Lag)
	}
	for _, name := range []string{"node1", "node2"} {
		if m, _ := v.Member(ids[name]); !m.CaughtUp {
			t.Errorf("%s not caught up: %s (behind %d)", name, m.Lag, m.Behind)
		}
	}
}

// notLeading moves leadership from member id (at endpoint) to member to
// when v shows it leads: the member to be frozen must be a follower (a
// frozen leader is replaced, which is another story).
func notLeading(t *testing.T, c *Client, v model.Cluster, endpoint string, id, to uint64) {
	t.Helper()
	if v.LeaderID != id {
		return
	}
	if err := c.MoveLeader(context.Background(), endpoint, to); err != nil {
		t.Fatal(err)
	}
	observeUntil(t, c, "the member to be frozen to hand leadership over", func(v model.Cluster) bool { return v.LeaderID != 0 && v.LeaderID != id })
}

// freezeFollower freezes the disk of member id (a follower) with freeze,
// while w writes and c observes, until the frozen member's Status still
// answers (see below); it returns c's observation after that.
func freezeFollower(t *testing.T, w, c *Client, id uint64, freeze, thaw func()) model.Cluster {
	t.Helper()
	ctx := context.Background()
	var v model.Cluster
	// Where the freeze catches etcd decides what its Status does: with
	// its raft loop stuck in a WAL write, Status answers from memory, with
	// its last leader and index (the case that matters here); with its
	// backend stuck in a commit, Status waits on the backend's lock and
	// times out (not healthy: counted by neither rule). The backend
	// commits every 100 ms: freezing a quiet member gives the first; try
	// a few times, quieter each time.
	for attempt := 1; ; attempt++ {
		put(t, w, 20)
		observeUntil(t, c, "all three caught up", func(v model.Cluster) bool { return model.NewView(v, nil).CaughtUp == 3 })
		time.Sleep(time.Duration(attempt) * time.Second) // let the backend commit
		freeze()
		put(t, w, 50)
		_, _ = c.Observe(ctx) // only to record the indexes
		put(t, w, 50)
		v = observe(t, c)
		m3, _ := v.Member(id)
		if m3.Healthy || attempt == 3 {
			break
		}
		t.Logf("attempt %d: the frozen member's Status did not answer (%s); again", attempt, m3.Err)
		thaw()
	}
	return v
}

// observe is c.Observe as the agent's passes do it: an observation that
// failed is followed by another, for up to 30 s. Until one has found a
// member frozen, the client's linearizable calls may go to it and time
// out (its raft loop is stuck): the member list of an observation made
// right after the freeze failed so in 1 of 3 runs of
// TestCallsAvoidAFrozenMember, whose client has all three endpoints.
func observe(t *testing.T, c *Client) model.Cluster {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := c.Observe(context.Background())
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no observation answered within 30 s: %v", err)
		}
		t.Logf("observation failed (another follows, as on the agent's next pass): %v", err)
	}
}

// observeUntil observes until cond holds, for at most 30 s.
func observeUntil(t *testing.T, c *Client, what string, cond func(model.Cluster) bool) model.Cluster {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := c.Observe(context.Background())
		if err == nil && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %+v %v", what, v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// put writes n keys, 16 at a time.
func put(t *testing.T, c *Client, n int) {
	t.Helper()
	cli, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("/load/%d", i), "x")
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("put: %v", err)
	}
}

// TestCallsAvoidAFrozenMember: once an observation finds a member whose
// disk hangs (answering Status, not keeping up), the client's calls stop
// going to it: every linearizable call succeeds, where before about a
// third of them waited out their deadline on the frozen member, and
// agents could not observe or take the lock for minutes. Once it keeps
// up again, the client uses it again.
func TestCallsAvoidAFrozenMember(t *testing.T) {
	dir, freeze, thaw := frozenDisk(t)
	nodes := testetcd.StartCluster(t, []testetcd.Node{
		{Name: "node1", Host: "127.0.0.1"}, {Name: "node2", Host: "127.0.0.2"}, {Name: "node3", Host: "127.0.0.3", Dir: filepath.Join(dir, "etcd")},
	}, nil)
	all := []string{nodes[0].ClientURL, nodes[1].ClientURL, nodes[2].ClientURL}
	c, err := Dial(all, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := Dial(all[:2], nil) // the writer never uses the frozen member
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	v := observeUntil(t, c, "a leader and three caught-up members", func(v model.Cluster) bool {
		return v.LeaderID != 0 && model.NewView(v, nil).CaughtUp == 3
	})
	if got := c.Active(); len(got) != 3 {
		t.Fatalf("active endpoints %v with every member keeping up, want all three", got)
	}
	ids := map[string]uint64{}
	for _, m := range v.Members {
		ids[m.Name] = m.ID
	}
	notLeading(t, c, v, nodes[2].ClientURL, ids["node3"], ids["node1"])
	v = freezeFollower(t, w, c, ids["node3"], freeze, thaw)
	// The writes just before the freeze may still reach node3's index:
	// write on until an observation shows it behind (or 30 s).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if m3, _ := v.Member(ids["node3"]); !m3.CaughtUp {
			break
		}
		put(t, w, 50)
		v = observe(t, c)
	}
	if m3, _ := v.Member(ids["node3"]); !m3.Healthy || m3.CaughtUp {
		t.Fatalf("frozen node3: healthy %v, caught up %v (%s %s): the test shows nothing", m3.Healthy, m3.CaughtUp, m3.Err, m3.Lag)
	}
	if got := c.Active(); slices.Contains(got, nodes[2].ClientURL) {
		t.Fatalf("active endpoints %v after observing node3 frozen: its calls would wait out their deadline", got)
	}
	failed := 0
	for i := 0; i < 30; i++ {
		if _, _, err := c.Members(ctx); err != nil {
			failed++
			t.Logf("call %d: %v", i, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of 30 member lists failed with node3 frozen and steered around", failed)
	}

	thaw()
	observeUntil(t, c, "node3 to keep up again, and the client to use it", func(model.Cluster) bool {
		return slices.Contains(c.Active(), nodes[2].ClientURL)
	})
}
