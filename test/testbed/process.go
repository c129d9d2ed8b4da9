package testbed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a child process of the test bed whose output goes to a log
// file: an agent, or the bench's plain etcd.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
	err  error         // how it exited, once done is closed
}

// StartProcess starts bin with args, its output appended to logPath;
// adjust, when not nil, changes the command before it starts.
func StartProcess(logPath string, adjust func(*exec.Cmd), bin string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if adjust != nil {
		adjust(cmd)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it (killed). err is how it exited.
func (p *Process) Stop(grace time.Duration) (killed bool, err error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
		killed = true
	}
	return killed, p.err
}

// Wait waits up to d for the process to exit by itself (exited) and
// returns how it exited.
func (p *Process) Wait(d time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// Start starts the agent of Member name; env adds environment variables.
func (c *Cluster) Start(name string, env ...string) {
	c.t.Helper()
	c.StartBinary(name, Binary, env...)
}

// StartBinary starts the agent of Member name from the executable bin (a
// host's own installed copy, which a test may replace as a package
// upgrade would).
func (c *Cluster) StartBinary(name, bin string, env ...string) {
	c.t.Helper()
	args := []string{"run", "--config", c.SpecPath(name), "--name", name, "--log-level", "debug"}
	if h := c.Member(name).Host; h.NS != "" {
		bin, args = h.Command(bin, args...)
	}
	p, err := StartProcess(c.LogPath(name), func(cmd *exec.Cmd) { cmd.Env = append(os.Environ(), env...) }, bin, args...)
	if err != nil {
		c.t.Fatalf("agent %s: %v", name, err)
	}
	c.agents[name] = p
}

// Stop sends SIGTERM to the agent and waits for it to exit.
func (c *Cluster) Stop(name string) error {
	c.t.Helper()
	p := c.agents[name]
	if p == nil {
		return nil
	}
	killed, err := p.Stop(60 * time.Second)
	if killed {
		c.t.Errorf("agent %s did not stop within 60s of SIGTERM", name)
	}
	delete(c.agents, name)
	return err
}

// Kill9 kills the agent with SIGKILL.
func (c *Cluster) Kill9(name string) {
	c.agents[name].Kill()
	delete(c.agents, name)
}

// WaitExit waits for the agent to exit by itself (a test crash point).
func (c *Cluster) WaitExit(name string, d time.Duration) error {
	c.t.Helper()
	exited, err := c.agents[name].Wait(d)
	if !exited {
		c.t.Fatalf("agent %s did not exit within %s", name, d)
	}
	delete(c.agents, name)
	return err
}

func (c *Cluster) cleanup() {
	// All at once: stopped one by one, the last agents stop beside a
	// member without quorum, where each waits out its calls' timeouts
	// (their lock, their record) before it stops etcd, seconds per agent.
	var wg sync.WaitGroup
	for name, p := range c.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if killed, _ := p.Stop(60 * time.Second); killed {
				c.t.Errorf("agent %s did not stop within 60s of SIGTERM", name)
			}
		}()
	}
	wg.Wait()
	clear(c.agents)
	if c.t.Failed() {
		for _, m := range c.Members {
			c.DumpLog(m.Name, 60)
		}
	}
	if c.net != nil {
		for _, m := range c.Members {
			_ = c.net.RemoveHost(m.Host)
		}
	}
}

// DumpLog prints the agent's own log lines (not etcd's) for a failure.
func (c *Cluster) DumpLog(name string, n int) {
	b, err := os.ReadFile(c.LogPath(name))
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
	return c.LogCount(name, parts...) > 0
}

// LogCount is how many lines of the agent's log have all parts.
func (c *Cluster) LogCount(name string, parts ...string) int {
	b, _ := os.ReadFile(c.LogPath(name))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
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

// Alive reports whether process pid runs (a zombie does not).
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

// Signal sends sig to the agent of member name.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	p := c.agents[name]
	if p == nil {
		return fmt.Errorf("agent %s is not running", name)
	}
	return p.Signal(sig)
}

// AgentPID is the process ID of the running agent of member name, 0 when
// the test bed runs no agent for it.
func (c *Cluster) AgentPID(name string) int {
	p := c.agents[name]
	if p == nil {
		return 0
	}
	return p.Pid()
}

// AgentRunning reports whether the test bed runs an agent for member name
// that has not exited.
func (c *Cluster) AgentRunning(name string) bool {
	p := c.agents[name]
	return p != nil && p.Running()
}

// LogPath is the agent log of member name (its own lines and etcd's).
func (c *Cluster) LogPath(name string) string { return filepath.Join(c.Dir, name+".log") }

// Passes is how many passes agent name's loop has run (its /status); an
// error when the agent does not answer.
func (c *Cluster) Passes(name string) (int64, error) {
	var st struct {
		Passes int64 `json:"passes"`
	}
	err := c.AgentStatus(name, &st)
	return st.Passes, err
}

// AgentStatus decodes agent name's /status into v.
func (c *Cluster) AgentStatus(name string, v any) error {
	m := c.Member(name)
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s:%d/status", m.IP, m.AgentPort))
	if err != nil {
		return fmt.Errorf("agent %s /status: %w", name, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("agent %s /status: %w", name, err)
	}
	return nil
}

// WaitPasses waits until each named agent has run n more passes (n in
// all, for an agent whose endpoint does not answer yet): a proof,
// not a guess by sleeping, that the agents looked at the cluster again
// (and decided what they decided) after what the test just did.
func (c *Cluster) WaitPasses(d time.Duration, n int64, names ...string) {
	c.t.Helper()
	for _, name := range names {
		start, err := c.Passes(name)
		if err != nil {
			// Just started, its endpoint not up yet: it counts from 0.
			start = 0
		}
		Eventually(c.t, d, fmt.Sprintf("%d more passes of %s's agent", n, name), func() string {
			now, err := c.Passes(name)
			switch {
			case err != nil:
				return err.Error()
			case now < start+n:
				return fmt.Sprintf("%d of %d passes", now-start, n)
			}
			return ""
		})
	}
}

// KickPasses is WaitPasses with the passes asked for: n times, it sends
// each named agent SIGHUP (read the spec file again, then run a pass at
// once) and waits until its pass count went up. An agent of a cluster
// that has nothing to do runs a pass only every 5 s by itself (its steady
// period); a pass after SIGHUP is an ordinary pass, one that also re-read
// the spec.
func (c *Cluster) KickPasses(d time.Duration, n int64, names ...string) {
	c.t.Helper()
	for _, name := range names {
		for i := int64(0); i < n; i++ {
			start, err := c.Passes(name)
			if err != nil {
				c.t.Fatalf("%v", err)
			}
			if err := c.Signal(name, syscall.SIGHUP); err != nil {
				c.t.Fatalf("%v", err)
			}
			Eventually(c.t, d, fmt.Sprintf("a pass of %s's agent after SIGHUP", name), func() string {
				now, err := c.Passes(name)
				switch {
				case err != nil:
					return err.Error()
				case now <= start:
					return "no pass yet"
				}
				return ""
			})
		}
	}
}
