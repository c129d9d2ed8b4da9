// Package testbed runs real etcdkeeper agents, each with its real etcd
// child, on loopback addresses 127.0.x.y with free ports: the harness of
// the integration tests, the benchmarks and the chaos run. Nothing here is
// a mock: it drives the binary the README's users run.
package testbed

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// Binary is the etcdkeeper binary the agents run; set it before New.
var Binary string

// TB is the part of testing.TB the test bed needs; the bench and chaos
// programs implement it too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Member is one "host" of a test cluster: its own loopback address.
type Member struct {
	Name       string
	IP         string
	PeerPort   int
	ClientPort int
	AgentPort  int
	// Scheme of the member's URLs: "https" once the cluster uses TLS,
	// "" for http.
	Scheme string
}

func (m Member) PeerURL() string   { return fmt.Sprintf("%s://%s:%d", m.scheme(), m.IP, m.PeerPort) }
func (m Member) ClientURL() string { return fmt.Sprintf("%s://%s:%d", m.scheme(), m.IP, m.ClientPort) }

func (m Member) scheme() string {
	if m.Scheme == "" {
		return "http"
	}
	return m.Scheme
}

// Cluster is a test cluster: a spec file, a data root and the agents.
type Cluster struct {
	t       TB
	Dir     string
	Spec    string
	Members []Member
	agents  map[string]*agentProc
	Extra   string // extra YAML appended to the spec
	// AgentExtra is YAML added under agent: (indented two spaces).
	AgentExtra string
	tls        *tls.Config
}

type agentProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// hostCounter gives each test cluster fresh loopback addresses, so that a
// slow-to-close socket of one test never bites the next.
var hostCounter atomic.Int64

func init() { hostCounter.Store(10) }

func New(t TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Dir: t.TempDir(), agents: map[string]*agentProc{}}
	c.Spec = filepath.Join(c.Dir, "cluster.yaml")
	for i := 0; i < n; i++ {
		c.AddMember()
	}
	c.WriteSpec()
	t.Cleanup(c.cleanup)
	return c
}

// AddMember adds a Member to the test cluster (not yet to the spec file).
func (c *Cluster) AddMember() Member {
	n := hostCounter.Add(1)
	ip := fmt.Sprintf("127.0.%d.%d", n/250, n%250+1)
	m := Member{Name: fmt.Sprintf("node%d", len(c.Members)+1), IP: ip,
		PeerPort: FreePort(c.t, ip), ClientPort: FreePort(c.t, ip), AgentPort: FreePort(c.t, ip)}
	if c.tls != nil {
		m.Scheme = "https"
	}
	c.Members = append(c.Members, m)
	return m
}

// UseTLS switches the members' URLs to https and makes the test clients
// connect with cfg. The spec's tls: section goes in Extra; call WriteSpec
// after both.
func (c *Cluster) UseTLS(cfg *tls.Config) {
	c.tls = cfg
	for i := range c.Members {
		c.Members[i].Scheme = "https"
	}
}

func FreePort(t TB, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("free port on %s: %v", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WriteSpec writes the spec listing members (all by default), atomically.
func (c *Cluster) WriteSpec(names ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:\n  name: itest\nmembers:\n")
	for _, m := range c.Members {
		if len(names) > 0 && !slices.Contains(names, m.Name) {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n    peerURLs: [%q]\n    clientURLs: [%q]\n    agentAddr: %s:%d\n",
			m.Name, m.PeerURL(), m.ClientURL(), m.IP, m.AgentPort)
	}
	fmt.Fprintf(&b, "etcd:\n  dataDir: %s/{name}/etcd\n  flags:\n    log-level: warn\n", c.Dir)
	fmt.Fprintf(&b, "agent:\n  stateDir: %s/{name}/state\n  interval: 500ms\n  stopTimeout: 10s\n%s", c.Dir, c.AgentExtra)
	b.WriteString(c.Extra)
	if err := atomicfile.WriteFile(c.Spec, []byte(b.String()), 0o644); err != nil {
		c.t.Fatalf("%v", err)
	}
}

func (c *Cluster) Member(name string) Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	c.t.Fatalf("no Member %s", name)
	return Member{}
}

func (c *Cluster) DataDir(name string) string  { return filepath.Join(c.Dir, name, "etcd") }
func (c *Cluster) StateDir(name string) string { return filepath.Join(c.Dir, name, "state") }

// start starts the agent of Member name; env adds environment variables.
func (c *Cluster) Start(name string, env ...string) {
	c.t.Helper()
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	cmd := exec.Command(Binary, "run", "--config", c.Spec, "--name", name, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("%v", err)
	}
	p := &agentProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.agents[name] = p
}

// stop sends SIGTERM to the agent and waits for it to exit.
func (c *Cluster) Stop(name string) error {
	c.t.Helper()
	p := c.agents[name]
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		c.t.Errorf("agent %s did not stop within 60s of SIGTERM", name)
	}
	delete(c.agents, name)
	return p.err
}

// Kill9 kills the agent with SIGKILL.
func (c *Cluster) Kill9(name string) {
	p := c.agents[name]
	_ = p.cmd.Process.Kill()
	<-p.done
	delete(c.agents, name)
}

// WaitExit waits for the agent to exit by itself (a test crash point).
func (c *Cluster) WaitExit(name string, d time.Duration) error {
	c.t.Helper()
	p := c.agents[name]
	select {
	case <-p.done:
		delete(c.agents, name)
		return p.err
	case <-time.After(d):
		c.t.Fatalf("agent %s did not exit within %s", name, d)
		return nil
	}
}

func (c *Cluster) cleanup() {
	for name := range c.agents {
		_ = c.Stop(name)
	}
	if c.t.Failed() {
		for _, m := range c.Members {
			c.DumpLog(m.Name, 60)
		}
	}
}

// DumpLog prints the agent's own log lines (not etcd's) for a failure.
func (c *Cluster) DumpLog(name string, n int) {
	b, err := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"logger":"etcd"`) || strings.Contains(sc.Text(), `"level":"error"`) {
			lines = append(lines, sc.Text())
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	c.t.Logf("---- last agent log lines of %s ----\n%s", name, strings.Join(lines, "\n"))
}

// LogContains reports whether the agent's log has a line with all parts.
func (c *Cluster) LogContains(name string, parts ...string) bool {
	b, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// EtcdPID is the PID the agent recorded for its etcd child.
func (c *Cluster) EtcdPID(name string) int {
	b, err := os.ReadFile(filepath.Join(c.StateDir(name), "etcd.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) is dead for our purposes.
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

// client connects to the given members (all by default).
func (c *Cluster) Client(names ...string) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range c.Members {
		if len(names) == 0 || slices.Contains(names, m.Name) {
			eps = append(eps, m.ClientURL())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, TLS: c.tls, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// MemberInfo is one Member as the cluster lists it, with its health.
type MemberInfo struct {
	ID        uint64
	Name      string
	IsLearner bool
	Healthy   bool
	// Started: the member published its client URLs (an initial-cluster
	// member that never started has a name but no client URL).
	Started bool
}

// members lists the cluster's members through the given client and checks
// each one's status.
func (c *Cluster) MemberList(cli *clientv3.Client) ([]MemberInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []MemberInfo
	for _, m := range resp.Members {
		mi := MemberInfo{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner, Started: len(m.ClientURLs) > 0}
		if len(m.ClientURLs) > 0 {
			st, err := cli.Status(ctx, m.ClientURLs[0])
			// The endpoint must answer as this very member: a stale entry
			// shares its URLs with the host's new member.
			mi.Healthy = err == nil && st.Header.MemberId == m.ID && st.Leader != 0 && len(st.Errors) == 0
		}
		out = append(out, mi)
	}
	return out, nil
}

// WaitVoters waits until the cluster consists of exactly the named
// members, all healthy voters, and returns their IDs by name.
func (c *Cluster) WaitVoters(d time.Duration, names ...string) map[string]uint64 {
	c.t.Helper()
	cli := c.Client(names...)
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		ms, err := c.MemberList(cli)
		if err != nil {
			last = err.Error()
		} else if ids, why := exactVoters(ms, names); why == "" {
			return ids
		} else {
			last = why
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.t.Fatalf("cluster did not converge to healthy voters %v within %s: %s", names, d, last)
	return nil
}

func exactVoters(ms []MemberInfo, names []string) (map[string]uint64, string) {
	ids := map[string]uint64{}
	for _, m := range ms {
		switch {
		case m.Name == "" || !m.Started:
			return nil, fmt.Sprintf("unstarted Member %x", m.ID)
		case m.IsLearner:
			return nil, fmt.Sprintf("learner %s (%x)", m.Name, m.ID)
		case !slices.Contains(names, m.Name):
			return nil, fmt.Sprintf("extra Member %s", m.Name)
		case !m.Healthy:
			return nil, fmt.Sprintf("Member %s unhealthy", m.Name)
		}
		ids[m.Name] = m.ID
	}
	if len(ids) != len(names) {
		return nil, fmt.Sprintf("members %v, want %v", keys(ids), names)
	}
	return ids, ""
}

func keys(m map[string]uint64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func Names(ms ...Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func (c *Cluster) AllNames() []string { return Names(c.Members...) }

// Eventually waits for cond with a deadline; cond returns "" when met or
// why it is not.
func Eventually(t TB, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	var why string
	for time.Now().Before(deadline) {
		if why = cond(); why == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %s", what, d, why)
}

func Put(t TB, cli *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

// GetFrom reads key serializably from one member's own endpoint: proof
// that the Member itself holds the data.
func (c *Cluster) GetFrom(name, key string) (string, error) {
	cli := c.Client(name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("key %s not found on %s", key, name)
	}
	return string(resp.Kvs[0].Value), nil
}

// agentStatus reads the journal file of a member's agent.
func (c *Cluster) Journal(name string) map[string]any {
	b, err := os.ReadFile(filepath.Join(c.StateDir(name), "rejoin.json"))
	if err != nil {
		return nil
	}
	var j map[string]any
	_ = json.Unmarshal(b, &j)
	return j
}

// CorruptWAL flips one byte in the middle of the member's first WAL file,
// the way a bad sector does: etcd then dies with "walpb: crc mismatch". A
// flip that lands in a record's padding is harmless (the CRC covers only
// the data), so it flips, checks with etcd's own WAL code, and moves on to
// the next byte until the WAL is really corrupt. The member must be
// stopped.
func (c *Cluster) CorruptWAL(name string) string {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.DataDir(name), "member", "wal", "*.wal"))
	if len(files) == 0 {
		c.t.Fatalf("no WAL files for %s", name)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	defer f.Close()
	st, _ := f.Stat()
	// The used part of a preallocated WAL is at its start: flip a byte
	// well inside the records, not in the zeroed tail.
	off := usedBytes(f, st.Size()) / 2
	for try := 0; try < 64; try, off = try+1, off+1 {
		flip(c.t, f, off)
		switch repair.Inspect(nil, c.DataDir(name)).State {
		case repair.DirCorrupt:
			return files[0]
		case repair.DirLocked:
			// A running etcd holds the db: the check cannot run. 16 bytes
			// in a row are more than any record's padding (at most 7).
			for i := int64(1); i < 16; i++ {
				flip(c.t, f, off+i)
			}
			return files[0]
		}
		flip(c.t, f, off) // harmless spot: put it back
	}
	c.t.Fatalf("could not corrupt the WAL of %s", name)
	return ""
}

func flip(t TB, f *os.File, off int64) {
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("%v", err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatalf("%v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("%v", err)
	}
}

// usedBytes finds the end of the non-zero data in a preallocated file.
func usedBytes(f *os.File, size int64) int64 {
	buf := make([]byte, 64*1024)
	var last int64
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, _ := f.ReadAt(buf, off)
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				last = off + int64(i) + 1
				break
			}
		}
	}
	return last
}

// Backups lists the moved-aside data dirs of a member.
func (c *Cluster) Backups(name string) []string {
	dir := filepath.Join(c.DataDir(name), ".etcdkeeper-backups")
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// Writer puts keys in a loop through the given members until stopped and
// counts writes that did not succeed within retryFor (a write that fails
// once and succeeds on retry within retryFor counts as success).
type Writer struct {
	stop    chan struct{}
	done    chan struct{}
	OK      atomic.Int64
	Failed  atomic.Int64
	LastErr atomic.Value
	Prefix  string
}

// StartWriter starts a writer through the named members' endpoints.
func (c *Cluster) StartWriter(prefix string, retryFor time.Duration, names ...string) *Writer {
	cli := c.Client(names...)
	w := &Writer{stop: make(chan struct{}), done: make(chan struct{}), Prefix: prefix}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			key := fmt.Sprintf("%s/%06d", prefix, i)
			deadline := time.Now().Add(retryFor)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := cli.Put(ctx, key, "v")
				cancel()
				if err == nil {
					w.OK.Add(1)
					break
				}
				if time.Now().After(deadline) {
					w.Failed.Add(1)
					w.LastErr.Store(err.Error())
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	return w
}

// Stop stops the writer and waits for it.
func (w *Writer) Stop() {
	close(w.stop)
	<-w.done
}

// PeerURLs maps each started member's name to its first peer URL.
func (c *Cluster) PeerURLs(cli *clientv3.Client) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range resp.Members {
		if len(m.PeerURLs) > 0 {
			out[m.Name] = m.PeerURLs[0]
		}
	}
	return out, nil
}

// Signal sends sig to the agent of member name.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	p := c.agents[name]
	if p == nil {
		return fmt.Errorf("agent %s is not running", name)
	}
	return p.cmd.Process.Signal(sig)
}

// ---- For the bench and chaos programs (test/bench, test/chaos) ----

// AgentPID is the process ID of the running agent of member name, 0 when
// the test bed runs no agent for it.
func (c *Cluster) AgentPID(name string) int {
	p := c.agents[name]
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// AgentRunning reports whether the test bed runs an agent for member name
// that has not exited.
func (c *Cluster) AgentRunning(name string) bool {
	p := c.agents[name]
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// LogPath is the agent log of member name (its own lines and etcd's).
func (c *Cluster) LogPath(name string) string { return filepath.Join(c.Dir, name+".log") }

// Runner is a TB for programs: Logf and Errorf print with a time stamp,
// Fatalf panics with a FatalError that Catch turns into an error, and
// Close runs the cleanups, last first. Safe for concurrent use.
type Runner struct {
	mu       sync.Mutex
	root     string
	n        int
	cleanups []func()
	failed   bool
	// Out receives Logf and Errorf; os.Stderr when nil.
	Out io.Writer
}

// FatalError is what Runner.Fatalf panics with.
type FatalError struct{ Msg string }

func (e FatalError) Error() string { return e.Msg }

// NewRunner makes a Runner whose TempDir creates numbered folders under
// root (created if missing).
func NewRunner(root string) (*Runner, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &Runner{root: root}, nil
}

func (r *Runner) Helper() {}

func (r *Runner) out() io.Writer {
	if r.Out == nil {
		return os.Stderr
	}
	return r.Out
}

func (r *Runner) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out(), "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (r *Runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	r.Logf("ERROR: "+format, args...)
}

func (r *Runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(FatalError{Msg: fmt.Sprintf(format, args...)})
}

func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *Runner) TempDir() string {
	r.mu.Lock()
	r.n++
	dir := filepath.Join(r.root, fmt.Sprintf("%03d", r.n))
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	return dir
}

func (r *Runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Close runs the cleanups registered so far, last first.
func (r *Runner) Close() {
	for {
		r.mu.Lock()
		if len(r.cleanups) == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[len(r.cleanups)-1]
		r.cleanups = r.cleanups[:len(r.cleanups)-1]
		r.mu.Unlock()
		f()
	}
}

// Catch runs f and returns the FatalError it panicked with, if any; other
// panics go on.
func Catch(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			fe, ok := p.(FatalError)
			if !ok {
				panic(p)
			}
			err = fe
		}
	}()
	f()
	return nil
}

// SetupProgram prepares a program (bench, chaos) to run agents: it points
// Binary at bin (made absolute, checked) and makes a Runner in dir, or in a
// new temp dir named after prog when dir is empty. It returns the runner
// and its dir; errors name prog and say what to do.
func SetupProgram(prog, bin, dir string) (*Runner, string, error) {
	abs, err := filepath.Abs(bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: etcdkeeper binary: %w (run make build, or pass -bin)", prog, err)
	}
	Binary = abs
	if dir == "" {
		if dir, err = os.MkdirTemp("", "etcdkeeper-"+prog+"-"); err != nil {
			return nil, "", fmt.Errorf("%s: %w", prog, err)
		}
	}
	r, err := NewRunner(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", prog, err)
	}
	return r, dir, nil
}
