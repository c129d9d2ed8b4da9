// Package etcdproc runs the local etcd server as a child process: it builds
// the command line from the spec, starts etcd, passes its log through, keeps
// the last lines and the exit status for failure classification, and stops
// it gracefully.
package etcdproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TailLines is how many of etcd's last log lines are kept for
// classification of its exit.
const TailLines = 80

// Exit is how an etcd process ended.
type Exit struct {
	Code   int    // exit status; -1 when killed by a signal
	Signal string // the signal that killed it, "" when it exited
	Tail   []string
	At     time.Time
	// Uptime is how long the process ran.
	Uptime time.Duration
	// ByAgent is why the agent itself killed the process (SIGKILL), ""
	// when it did not: the signal alone would blame an operator or the
	// OOM killer.
	ByAgent string
	// OOM: the SIGKILL came from the kernel's OOM killer (the memory
	// cgroup etcd ran in counted one more OOM kill, MemCgroup's oom_kill).
	OOM       bool
	MemCgroup string
}

// String is a one-line description such as "exit status 1" or "killed by
// signal killed".
func (e Exit) String() string {
	if e.ByAgent != "" {
		return "killed by the agent (SIGKILL: " + e.ByAgent + ")"
	}
	if e.OOM {
		return "killed by the kernel's OOM killer (SIGKILL)"
	}
	if e.Signal != "" {
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Command is how to start etcd.
type Command struct {
	Path string
	Args []string
	// Env is the child's environment. Build it with ChildEnv so that etcd
	// never talks to systemd itself.
	Env []string
	// PassLevel: etcd's log lines below it are not passed through to the
	// agent's log (the zero value, info, passes what etcd's default level
	// logs). See passLevel.
	PassLevel zapcore.Level
	// Lifeline: the child is etcdkeeper's own `etcd` command, which ends
	// itself when the agent process is gone (LifelineEnv) instead of the
	// kernel's Pdeathsig. Pdeathsig fires when the thread that started
	// the child exits, and an exec ends every thread but one: only a
	// child on a lifeline can outlive the agent's exec onto a new binary
	// and be adopted by it (Handoff, Adopt).
	Lifeline bool
}

// LifelineEnv names the fd, in etcdkeeper's own `etcd` command, of the
// read end of a pipe whose write end only the agent process holds: when
// it reads EOF, the agent is gone (killed: its fds closed), and etcd ends
// at once, as Pdeathsig would have ended it.
const LifelineEnv = "ETCDKEEPER_LIFELINE_FD"

// Process is one running etcd child.
type Process struct {
	os      *os.Process
	cmd     Command
	started time.Time
	// log is the read end of etcd's stdout and stderr; lifeline the write
	// end of its lifeline (nil: none, the child has Pdeathsig).
	log      *os.File
	lifeline *os.File
	done     chan struct{}
	tail     *tail
	logDone  chan struct{}
	pass     zapcore.Level
	publish  *publishWatch

	mu   sync.Mutex
	exit Exit
	// killedBy is why the agent sent SIGKILL ("" until it does).
	killedBy string
	// mem follows the memory cgroup etcd runs in (oom.go).
	mem memWatch
}

// Start starts etcd. The child gets its own process group (a Ctrl-C in a
// terminal reaches the agent, which then stops etcd in order) and ends
// when the agent dies, so a kill -9 of the agent leaves no unsupervised
// etcd behind: etcdkeeper's own etcd by its lifeline (Command.Lifeline),
// an etcd binary of the spec's by the kernel (Pdeathsig).
func Start(lg *zap.Logger, c Command) (*Process, error) { return start(lg, c, PublishHooks{}) }

// start is Start with the callbacks of the publish watch: OnStall is
// called once etcd has applied a snapshot from the leader and has not
// published itself within StallAfter (or Confirm proved the stall).
func start(lg *zap.Logger, c Command, hooks PublishHooks) (*Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logR, logW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("etcd log pipe: %w", err)
	}
	defer func() { _ = logW.Close() }()
	cmd.Stdout, cmd.Stderr = logW, logW
	var lifeR, lifeW *os.File
	if c.Lifeline {
		if lifeR, lifeW, err = os.Pipe(); err != nil {
			_ = logR.Close()
			return nil, fmt.Errorf("etcd lifeline pipe: %w", err)
		}
		defer func() { _ = lifeR.Close() }()
		cmd.ExtraFiles = []*os.File{lifeR}
		cmd.Env = append(slices.Clone(cmd.Env), LifelineEnv+"=3")
	} else {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		_ = logR.Close()
		if lifeW != nil {
			_ = lifeW.Close()
		}
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	p := newProcess(cmd.Process, c, time.Now(), logR, lifeW, hooks)
	go p.pipeLog(lg, logR)
	go p.wait()
	return p, nil
}

func newProcess(osp *os.Process, c Command, started time.Time, log, lifeline *os.File, hooks PublishHooks) *Process {
	p := &Process{os: osp, cmd: c, started: started, log: log, lifeline: lifeline, done: make(chan struct{}), tail: newTail(TailLines),
		logDone: make(chan struct{}), pass: c.PassLevel, publish: newPublishWatch(StallAfter, hooks)}
	p.mem.look(osp.Pid)
	return p
}

// NoteCgroup looks at the memory cgroup etcd runs in again (it may have
// been moved since it started): its OOM kills are counted from now.
func (p *Process) NoteCgroup() {
	if !p.Running() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mem.look(p.PID())
}

// PID is the child's process ID.
func (p *Process) PID() int { return p.os.Pid }

// Started is when the process was started.
func (p *Process) Started() time.Time { return p.started }

// Done is closed when the process has exited and its log is drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// LostPublishRace reports whether etcd is in its publish stall: it
// applied a snapshot from the leader more than StallAfter ago and has not
// published itself since (docs/etcd-publish-stall.md).
func (p *Process) LostPublishRace() bool { return p.publish.Stalled(time.Now()) }

// PublishStalled is closed when etcd is found in its publish stall, at
// most StallAfter after it applied the snapshot. It stays closed should a
// late publish end the stall: LostPublishRace is the current state.
func (p *Process) PublishStalled() <-chan struct{} { return p.publish.stalled }

// Exit is the exit status; valid once Done is closed.
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

func (p *Process) wait() {
	// Read the log to its end first: Wait closes the pipe, and lines still
	// buffered in it — the last words of a crashing etcd, which its exit
	// is classified by — would be lost.
	<-p.logDone
	ps, err := p.os.Wait()
	_ = p.log.Close()
	if p.lifeline != nil {
		_ = p.lifeline.Close()
	}
	p.publish.stop()
	e := Exit{At: time.Now(), Tail: p.tail.lines(), Uptime: time.Since(p.started)}
	e.Code, e.Signal = exitCode(ps, err)
	p.mu.Lock()
	if e.Signal == syscall.SIGKILL.String() {
		e.ByAgent = p.killedBy
		e.OOM = e.ByAgent == "" && p.mem.killed()
		e.MemCgroup = p.mem.file
	}
	p.exit = e
	p.mu.Unlock()
	close(p.done)
}

func exitCode(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return -1, fmt.Sprint(err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return ps.ExitCode(), ""
}

// Stop sends SIGTERM, waits up to timeout for etcd to exit, then sends
// SIGKILL. It returns once the process is gone.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	if err := p.os.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sigterm etcd pid %d: %w", p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	return p.Kill(fmt.Sprintf("still running %s after SIGTERM", timeout))
}

// Kill sends SIGKILL at once, noting why (the exit then says the agent
// killed it), and returns once the process is gone. It is how a stopped
// process (SIGSTOP) ends: it cannot act on SIGTERM, and SIGKILL needs no
// SIGCONT.
func (p *Process) Kill(why string) error {
	if !p.Running() {
		return nil
	}
	p.mu.Lock()
	p.killedBy = why
	p.mu.Unlock()
	if err := p.os.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sigkill etcd pid %d: %w", p.PID(), err)
	}
	<-p.done
	return nil
}

func (p *Process) pipeLog(lg *zap.Logger, r io.Reader) {
	defer close(p.logDone)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		p.tail.add(line)
		p.publish.line(line, time.Now())
		passThrough(lg, line, p.pass)
	}
	// A line too long for the scanner ends the scan: keep draining, or
	// etcd blocks writing to a full pipe and never exits.
	_, _ = io.Copy(io.Discard, r)
}

// ChildEnv is the agent's environment without the variables through which
// systemd talks to a service: etcdmain sends READY=1 itself, and only the
// agent may speak to systemd.
func ChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "NOTIFY_SOCKET=") || strings.HasPrefix(kv, "WATCHDOG_") || strings.HasPrefix(kv, "LISTEN_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

type tail struct {
	mu  sync.Mutex
	max int
	buf []string
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == t.max {
		copy(t.buf, t.buf[1:])
		t.buf = t.buf[:t.max-1]
	}
	t.buf = append(t.buf, line)
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.buf...)
}
