package etcdproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Handoff is what an agent leaves the new binary it execs onto of its
// running etcd, so that etcd keeps running through an upgrade of the
// agent alone: an exec keeps the PID, so etcd stays this process's child,
// and the two pipes stay open (see Process.Handoff).
type Handoff struct {
	PID        int       `json:"pid"`
	LogFD      int       `json:"logFD"`
	LifelineFD int       `json:"lifelineFD"`
	Started    time.Time `json:"started"`
	Path       string    `json:"path"`
	Args       []string  `json:"args"`
}

// Adoptable: p runs on a lifeline (etcdkeeper's own etcd, see
// Command.Lifeline), so it can outlive an exec of the agent.
func (p *Process) Adoptable() bool { return p != nil && p.lifeline != nil && p.Running() }

// Handoff readies p to outlive the agent's exec: the read end of its log
// and the write end of its lifeline stay open across it (close-on-exec
// cleared). The exec must follow; if it fails, KeepCloseOnExec undoes it.
func (p *Process) Handoff() (Handoff, error) {
	if !p.Adoptable() {
		return Handoff{}, errors.New("etcd does not run on a lifeline: it cannot outlive the agent's exec")
	}
	h := Handoff{PID: p.PID(), Started: p.started, Path: p.cmd.Path, Args: p.cmd.Args}
	var err error
	if h.LogFD, err = setCloseOnExec(p.log, false); err != nil {
		return Handoff{}, fmt.Errorf("etcd's log pipe: %w", err)
	}
	if h.LifelineFD, err = setCloseOnExec(p.lifeline, false); err != nil {
		p.KeepCloseOnExec()
		return Handoff{}, fmt.Errorf("etcd's lifeline: %w", err)
	}
	return h, nil
}

// KeepCloseOnExec closes p's pipes on exec again: no child of the agent
// but etcd may hold them (the lifeline's write end in another process
// would keep etcd alive after the agent died).
func (p *Process) KeepCloseOnExec() {
	_, _ = setCloseOnExec(p.log, true)
	if p.lifeline != nil {
		_, _ = setCloseOnExec(p.lifeline, true)
	}
}

// setCloseOnExec sets or clears f's close-on-exec flag and returns its
// fd (through SyscallConn: Fd would put it into blocking mode under the
// goroutine that reads it).
func setCloseOnExec(f *os.File, on bool) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, ferr := -1, error(nil)
	err = rc.Control(func(u uintptr) {
		fd = int(u)
		flag := 0
		if on {
			flag = unix.FD_CLOEXEC
		}
		_, ferr = unix.FcntlInt(u, unix.F_SETFD, flag)
	})
	if err == nil {
		err = ferr
	}
	return fd, err
}

// Adopt takes over the etcd the old agent handed off (h), in the process
// the old one exec'd into: the same PID, so etcd is still its child, and
// the pipes' fds still open. It checks that much first: a Handoff whose
// etcd died meanwhile, or that another process wrote, adopts nothing (the
// caller then starts etcd as after any restart). c is how the agent
// would start etcd now (its log level); Path and Args are the running
// process's.
func Adopt(lg *zap.Logger, h Handoff, c Command, hooks PublishHooks) (*Process, error) {
	logF, logErr := pipeFD(h.LogFD, "etcd-log")
	lifeF, lifeErr := pipeFD(h.LifelineFD, "etcd-lifeline")
	refuse := func(err error) (*Process, error) {
		// Nothing handed over stays open: the next etcd, and any child
		// of the agent, would inherit it.
		for _, f := range []*os.File{logF, lifeF} {
			if f != nil {
				_ = f.Close()
			}
		}
		return nil, fmt.Errorf("adopt etcd pid %d: %w", h.PID, err)
	}
	ppid, state, err := procParent(h.PID)
	switch {
	case err != nil:
		return refuse(err)
	case ppid != os.Getpid():
		return refuse(fmt.Errorf("not a child of this process (parent %d)", ppid))
	case state == "Z":
		// It died during the exec: reap it, so no zombie stays behind.
		if osp, err := os.FindProcess(h.PID); err == nil {
			if ps, err := osp.Wait(); err == nil {
				lg.Warn("the etcd handed over died during the exec", zap.Int("pid", h.PID), zap.Stringer("exit", ps))
			}
		}
		return refuse(errors.New("it died during the exec"))
	case logErr != nil:
		return refuse(fmt.Errorf("its log: %w", logErr))
	case lifeErr != nil:
		return refuse(fmt.Errorf("its lifeline: %w", lifeErr))
	}
	osp, err := os.FindProcess(h.PID)
	if err != nil {
		return refuse(err)
	}
	c.Path, c.Args, c.Lifeline = h.Path, h.Args, true
	p := newProcess(osp, c, h.Started, logF, lifeF, hooks)
	// Only a serving voter is handed over: it published itself long ago,
	// and will not say so again (a snapshot it applies later is no
	// publish stall).
	p.publish.published = true
	go p.pipeLog(lg, logF)
	go p.wait()
	return p, nil
}

// pipeFD is fd as a file, closed on exec again, if it is a pipe.
func pipeFD(fd int, name string) (*os.File, error) {
	if fd < 3 {
		return nil, fmt.Errorf("fd %d is no pipe handed over", fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fd %d: %w", fd, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, fmt.Errorf("fd %d is not a pipe", fd)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), name), nil
}

// procParent is pid's parent and state, from /proc/PID/stat.
func procParent(pid int) (int, string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, "", fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, f[0], err
}

// Adopt takes over the etcd the old agent handed off (see Adopt) as the
// supervised process.
func (s *Supervisor) Adopt(h Handoff, c Command) (*Process, error) {
	p, err := Adopt(s.lg, h, c, s.Publish)
	if err != nil {
		return nil, err
	}
	s.proc, s.last = p, p.cmd
	return p, nil
}

// LifelineGrace is how long etcd may take to stop after its agent is
// gone before it is killed.
const LifelineGrace = 10 * time.Second

// WatchLifeline is for etcdkeeper's own `etcd` command: when LifelineEnv
// names a pipe, it ends this process once the pipe says the agent is
// gone: SIGTERM first, so that etcd stops as it does for its agent (a
// leader hands its leadership over first), SIGKILL after LifelineGrace.
func WatchLifeline() {
	v := os.Getenv(LifelineEnv)
	if v == "" {
		return
	}
	_ = os.Unsetenv(LifelineEnv)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		_, _ = io.Copy(io.Discard, f)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(LifelineGrace)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}()
}
