package repair

// Real etcd for the tests: an embedded server builds the data dirs once, and
// etcd's own main (etcdmain, the code the etcd binary runs) is started in a
// child process on damaged copies. A child process because etcd exits (zap
// Fatal) or panics in its own goroutines on a corrupt data dir, which would
// take the test binary down; it also yields a real exit status and log for
// Classify.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"go.etcd.io/etcd/server/v3/storage/wal"

	"github.com/etcdkeeper/etcdkeeper/internal/testport"
)

// childEnv carries etcd's flags (newline separated) to the child process.
const childEnv = "REPAIR_TEST_ETCDMAIN_ARGS"

// Small WAL segments keep the copies cheap and give the fixture several WAL
// files (etcd preallocates 64 MB per segment by default).
const testSegmentBytes = 128 * 1024

func TestMain(m *testing.M) {
	wal.SegmentSizeBytes = testSegmentBytes
	if args, ok := os.LookupEnv(childEnv); ok {
		etcdmain.Main(append([]string{"etcd"}, strings.Split(args, "\n")...))
		os.Exit(0)
	}
	code := m.Run()
	fixture.cleanup()
	os.Exit(code)
}

// realDirs are data dirs written by a real etcd, built once per test binary.
type realDirs struct {
	once sync.Once
	err  error
	root string
	a, b string // two one-member clusters with different tokens
	clusterA, clusterB,
	memberA uint64
	whileRunning Report // Inspect of a while etcd was serving
}

var fixture realDirs

func (f *realDirs) cleanup() {
	if f.root != "" {
		os.RemoveAll(f.root)
	}
}

// realFixture skips under -short: it starts etcd.
func realFixture(t *testing.T) *realDirs {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	fixture.once.Do(func() { fixture.err = fixture.build() })
	if fixture.err != nil {
		t.Fatalf("building etcd data dirs: %v", fixture.err)
	}
	return &fixture
}

func (f *realDirs) build() error {
	var err error
	if f.root, err = os.MkdirTemp("", "repair-etcd-"); err != nil {
		return err
	}
	f.a, f.b = filepath.Join(f.root, "a"), filepath.Join(f.root, "b")
	if f.clusterA, f.memberA, err = writeCluster(f.a, "cluster-a", 600, func() { f.whileRunning = Inspect(nil, f.a) }); err != nil {
		return fmt.Errorf("cluster a: %w", err)
	}
	if f.clusterB, _, err = writeCluster(f.b, "cluster-b", 10, nil); err != nil {
		return fmt.Errorf("cluster b: %w", err)
	}
	return nil
}

// writeCluster runs a one-member embedded etcd in dir, writes n keys of
// 1 KiB, calls whileRunning, and stops it. A low snapshot count makes etcd
// take snapshots, so the WAL starts at a snapshot index > 0 as in production.
func writeCluster(dir, token string, n int, whileRunning func()) (clusterID, memberID uint64, err error) {
	cfg := embedConfig(dir, token)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return 0, 0, err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		return 0, 0, errors.New("etcd not ready after 20s")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.AdvertiseClientUrls[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	val := strings.Repeat("v", 1024)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Put(ctx, fmt.Sprintf("/key/%05d", i), val)
		cancel()
		if err != nil {
			return 0, 0, err
		}
		clusterID = resp.Header.GetClusterId()
	}
	if whileRunning != nil {
		whileRunning()
	}
	return clusterID, uint64(e.Server.MemberID()), nil
}

func embedConfig(dir, token string) *embed.Config {
	peer, client := localURL(freePort()), localURL(freePort())
	cfg := embed.NewConfig()
	cfg.Name = "m1"
	cfg.Dir = dir
	cfg.InitialClusterToken = token
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = "m1=" + peer.String()
	cfg.SnapshotCount = 100
	cfg.SnapshotCatchUpEntries = 50
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return cfg
}

func localURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

// freePort is a free port (etcd refuses port 0 for peers) that no other
// freePort of this process nor another test process got (testport): a
// probe's port is free once it closes, and the kernel may offer it to the
// next probe, the client URL's after the peer URL's.
func freePort() int {
	port, err := testport.Free("127.0.0.1")
	if err != nil {
		panic(err)
	}
	return port
}

// outcome is what etcd made of a data dir.
type outcome int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=outcome
const (
	serves outcome = iota // /readyz answered 200
	fails                 // exited on its own
	hangs                 // runs but cannot publish itself: never ready
)

// notReady is etcd's own statement that it cannot become ready
// (etcdserver/server.go publishV3); it repeats every 5.2 s.
const notReady = "failed to publish local member to cluster through raft"

// etcdRun is the outcome of starting etcd's main on a data dir.
type etcdRun struct {
	outcome outcome
	exit    Exit // for serves and hangs: after the SIGTERM that stopped it
	log     string
}

// runEtcd starts etcd (etcdmain, in a child process) on dir, waits until it
// serves or exits, and stops it with SIGTERM if it serves.
func runEtcd(t *testing.T, dir string) etcdRun {
	t.Helper()
	peer, client := localURL(freePort()), localURL(freePort())
	args := []string{
		"--name=m1", "--data-dir=" + dir,
		"--listen-peer-urls=" + peer.String(), "--initial-advertise-peer-urls=" + peer.String(),
		"--listen-client-urls=" + client.String(), "--advertise-client-urls=" + client.String(),
		"--initial-cluster=m1=" + peer.String(), "--initial-cluster-token=cluster-a",
		"--heartbeat-interval=10", "--election-timeout=100",
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\n"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	run := etcdRun{outcome: fails}
	stopping := false
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			run.exit = exitOf(err, out.String())
			run.log = out.String()
			return run
		case <-tick.C:
			if stopping {
				continue
			}
			switch {
			case ready(client.String()):
				run.outcome = serves
			case strings.Contains(out.String(), notReady):
				run.outcome = hangs
			default:
				continue
			}
			stopping = true
			cmd.Process.Signal(syscall.SIGTERM)
		case <-deadline:
			cmd.Process.Kill()
			<-done
			t.Fatalf("etcd neither served nor exited in 30s; log:\n%s", out.String())
		}
	}
}

func ready(clientURL string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(clientURL + "/readyz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func exitOf(err error, log string) Exit {
	e := Exit{Tail: lastLines(log, 50)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
	}
	return e
}

func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
