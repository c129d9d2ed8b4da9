package testbed

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

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
