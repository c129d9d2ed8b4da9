package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// guardSignals are the signals guard takes instead of dying of them: a
// guard that died while CMD runs could neither give the turn back nor
// stop CMD, which would go on outside the turn.
var guardSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// signals catches guardSignals for the whole of a guard: while CMD runs
// each is passed on to CMD; otherwise the first cancels ctx, its cause
// a *signalled.
type signals struct {
	ch     chan os.Signal
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	child *os.Process // CMD while it runs
	// passed is the last signal passed on to CMD (nil: none).
	passed *signalled
}

// catchSignals catches guardSignals from now on, but those this process
// was started with ignored: nohup's SIGHUP stays ignored, for CMD too.
func catchSignals(parent context.Context) *signals {
	ctx, cancel := context.WithCancelCause(parent)
	s := &signals{ch: make(chan os.Signal, len(guardSignals)), ctx: ctx, cancel: cancel}
	for _, sig := range guardSignals {
		if !signal.Ignored(sig) {
			signal.Notify(s.ch, sig)
		}
	}
	go s.dispatch()
	return s
}

func (s *signals) dispatch() {
	for sig := range s.ch {
		s.mu.Lock()
		// A CMD that has just exited takes no signal: the signal is the
		// guard's then.
		got := &signalled{sig: sig.(syscall.Signal)}
		if s.child == nil || s.child.Signal(sig) != nil {
			s.cancel(got)
		} else {
			s.passed = got
		}
		s.mu.Unlock()
	}
}

// takePassed makes the last signal passed on to CMD the guard's own
// too (its context cancelled with it): the shutdown's SIGTERM that
// reached `systemctl reboot` while it ran was meant for the guard as
// well, and no second one comes (systemd would kill the guard only after
// its stop timeout).
func (s *signals) takePassed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passed != nil {
		s.cancel(s.passed)
	}
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.ch)
	s.cancel(nil)
}

// signalled is the cause of a guard's context that a signal cancelled.
type signalled struct{ sig syscall.Signal }

func (e *signalled) Error() string { return "got " + e.sig.String() }

// run runs CMD with this process's stdio, passing the caught signals on
// to it, and returns its exit status: 128+N when it died of signal N; 127
// when it could not be started; 128+N, without starting it, when the
// guard got signal N before.
func (s *signals) run(c *cobra.Command, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.OutOrStdout(), c.ErrOrStderr()
	// CMD must not outlive its guard (kill -9, the OOM killer): the agent
	// ends the turn of a guard that is gone. SIGKILL: a SIGTERM may be
	// ignored.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The kernel sends Pdeathsig when the thread that started CMD ends,
	// not the process: this goroutine keeps its thread until CMD is done.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.start(cmd); err != nil {
		if sig, ok := errors.AsType[*signalled](err); ok {
			fmt.Fprintf(c.ErrOrStderr(), "etcdkeeper: %s before %s started: not running it\n", sig, args[0])
			return 128 + int(sig.sig)
		}
		fmt.Fprintf(c.ErrOrStderr(), "etcdkeeper: %v\n", err)
		return 127
	}
	err := cmd.Wait()
	s.mu.Lock()
	s.child = nil
	s.mu.Unlock()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
	}
	fmt.Fprintf(c.ErrOrStderr(), "etcdkeeper: %v\n", err)
	return 127
}

// start starts cmd as the child the caught signals go to, unless one
// came already (its *signalled).
func (s *signals) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig, ok := errors.AsType[*signalled](context.Cause(s.ctx)); ok {
		return sig
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	s.child = cmd.Process
	return nil
}
