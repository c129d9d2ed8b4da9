// Package integration runs real etcdkeeper agents, each with its real etcd
// child, on loopback addresses 127.0.0.x with free ports. Nothing here is a
// mock: the tests drive the binary the README's users run.
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration tests skipped under -short")
		os.Exit(0)
	}
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	if b := os.Getenv("ETCDKEEPER_BIN"); b != "" {
		binary = b
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "etcdkeeper-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "etcdkeeper")
	cmd := exec.Command("go", "build", "-o", binary, "../../cmd/etcdkeeper")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("build etcdkeeper: %w", err)
	}
	return m.Run(), nil
}

// member is one "host" of a test cluster: its own loopback address.
type member struct {
	name      string
	ip        string
	peerPort  int
	clientPt  int
	agentPort int
}

func (m member) peerURL() string   { return fmt.Sprintf("http://%s:%d", m.ip, m.peerPort) }
func (m member) clientURL() string { return fmt.Sprintf("http://%s:%d", m.ip, m.clientPt) }

// tcluster is a test cluster: a spec file, a data root and the agents.
type tcluster struct {
	t       *testing.T
	dir     string
	spec    string
	members []member
	agents  map[string]*agentProc
	extra   string // extra YAML appended to the spec
}

type agentProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// hostCounter gives each test cluster fresh loopback addresses, so that a
// slow-to-close socket of one test never bites the next.
var hostCounter = 10

func newCluster(t *testing.T, n int) *tcluster {
	t.Helper()
	c := &tcluster{t: t, dir: t.TempDir(), agents: map[string]*agentProc{}}
	c.spec = filepath.Join(c.dir, "cluster.yaml")
	for i := 0; i < n; i++ {
		c.addMember()
	}
	c.writeSpec()
	t.Cleanup(c.cleanup)
	return c
}

// addMember adds a member to the test cluster (not yet to the spec file).
func (c *tcluster) addMember() member {
	hostCounter++
	ip := fmt.Sprintf("127.0.%d.%d", hostCounter/250, hostCounter%250+1)
	m := member{name: fmt.Sprintf("node%d", len(c.members)+1), ip: ip,
		peerPort: freePort(c.t, ip), clientPt: freePort(c.t, ip), agentPort: freePort(c.t, ip)}
	c.members = append(c.members, m)
	return m
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("free port on %s: %v", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeSpec writes the spec listing members (all by default), atomically.
func (c *tcluster) writeSpec(names ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster:\n  name: itest\nmembers:\n")
	for _, m := range c.members {
		if len(names) > 0 && !contains(names, m.name) {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n    peerURLs: [%q]\n    clientURLs: [%q]\n    agentAddr: %s:%d\n",
			m.name, m.peerURL(), m.clientURL(), m.ip, m.agentPort)
	}
	fmt.Fprintf(&b, "etcd:\n  dataDir: %s/{name}/etcd\n  flags:\n    log-level: warn\n", c.dir)
	fmt.Fprintf(&b, "agent:\n  stateDir: %s/{name}/state\n  interval: 500ms\n  stopTimeout: 10s\n", c.dir)
	b.WriteString(c.extra)
	tmp := c.spec + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, c.spec); err != nil {
		c.t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *tcluster) member(name string) member {
	for _, m := range c.members {
		if m.name == name {
			return m
		}
	}
	c.t.Fatalf("no member %s", name)
	return member{}
}

func (c *tcluster) dataDir(name string) string  { return filepath.Join(c.dir, name, "etcd") }
func (c *tcluster) stateDir(name string) string { return filepath.Join(c.dir, name, "state") }

// start starts the agent of member name; env adds environment variables.
func (c *tcluster) start(name string, env ...string) {
	c.t.Helper()
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", c.spec, "--name", name, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
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
func (c *tcluster) stop(name string) error {
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

// kill9 kills the agent with SIGKILL.
func (c *tcluster) kill9(name string) {
	p := c.agents[name]
	_ = p.cmd.Process.Kill()
	<-p.done
	delete(c.agents, name)
}

// waitExit waits for the agent to exit by itself (a test crash point).
func (c *tcluster) waitExit(name string, d time.Duration) error {
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

func (c *tcluster) cleanup() {
	for name := range c.agents {
		_ = c.stop(name)
	}
	if c.t.Failed() {
		for _, m := range c.members {
			c.dumpLog(m.name, 60)
		}
	}
}

// dumpLog prints the agent's own log lines (not etcd's) for a failure.
func (c *tcluster) dumpLog(name string, n int) {
	b, err := os.ReadFile(filepath.Join(c.dir, name+".log"))
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

// logContains reports whether the agent's log has a line with all parts.
func (c *tcluster) logContains(name string, parts ...string) bool {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
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

// etcdPID is the PID the agent recorded for its etcd child.
func (c *tcluster) etcdPID(name string) int {
	b, err := os.ReadFile(filepath.Join(c.stateDir(name), "etcd.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func alive(pid int) bool {
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
func (c *tcluster) client(names ...string) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range c.members {
		if len(names) == 0 || contains(names, m.name) {
			eps = append(eps, m.clientURL())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// memberInfo is one member as the cluster lists it, with its health.
type memberInfo struct {
	ID        uint64
	Name      string
	IsLearner bool
	Healthy   bool
}

// members lists the cluster's members through the given client and checks
// each one's status.
func (c *tcluster) members_(cli *clientv3.Client) ([]memberInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []memberInfo
	for _, m := range resp.Members {
		mi := memberInfo{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner}
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

// waitVoters waits until the cluster consists of exactly the named
// members, all healthy voters, and returns their IDs by name.
func (c *tcluster) waitVoters(d time.Duration, names ...string) map[string]uint64 {
	c.t.Helper()
	cli := c.client(names...)
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		ms, err := c.members_(cli)
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

func exactVoters(ms []memberInfo, names []string) (map[string]uint64, string) {
	ids := map[string]uint64{}
	for _, m := range ms {
		switch {
		case m.Name == "":
			return nil, fmt.Sprintf("unstarted member %x", m.ID)
		case m.IsLearner:
			return nil, fmt.Sprintf("learner %s (%x)", m.Name, m.ID)
		case !contains(names, m.Name):
			return nil, fmt.Sprintf("extra member %s", m.Name)
		case !m.Healthy:
			return nil, fmt.Sprintf("member %s unhealthy", m.Name)
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

func names(ms ...member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.name)
	}
	return out
}

func (c *tcluster) allNames() []string { return names(c.members...) }

// eventually waits for cond with a deadline; cond returns "" when met or
// why it is not.
func eventually(t *testing.T, d time.Duration, what string, cond func() string) {
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

func put(t *testing.T, cli *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

// getFrom reads key serializably from one member's own endpoint: proof
// that the member itself holds the data.
func (c *tcluster) getFrom(name, key string) (string, error) {
	cli := c.client(name)
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
func (c *tcluster) journal(name string) map[string]any {
	b, err := os.ReadFile(filepath.Join(c.stateDir(name), "rejoin.json"))
	if err != nil {
		return nil
	}
	var j map[string]any
	_ = json.Unmarshal(b, &j)
	return j
}
