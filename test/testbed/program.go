package testbed

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Program is what the test bed's programs (test/bench, test/chaos) share:
// the etcdkeeper binary their agents run, a work dir that outlives a
// failed run, and the flags for both.
type Program struct {
	Name    string // "bench", "chaos": starts its messages and its temp dir's name
	Bin     string // the etcdkeeper binary
	Dir     string // the work dir; "" for a new one under $TMPDIR
	Keep    bool   // keep the work dir of a passing run too
	Verbose bool   // show the test bed's own log lines
}

// AddFlags defines -bin, -dir, -keep and -v on fs.
func (p *Program) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&p.Bin, "bin", "bin/etcdkeeper", "the etcdkeeper binary (make "+p.Name+" builds it)")
	fs.StringVar(&p.Dir, "dir", "", "work dir (default: a new dir under $TMPDIR; kept when the run fails or -keep)")
	fs.BoolVar(&p.Keep, "keep", false, "keep the work dir of a passing run")
	fs.BoolVar(&p.Verbose, "v", false, "also print the test bed's own log lines (the last agent log lines of a failed cluster)")
}

// Setup points Binary at Bin (made absolute, checked), makes the work dir
// when Dir is empty, and returns a Runner in it, quiet unless Verbose.
// Errors name the program and say what to do.
func (p *Program) Setup() (*Runner, error) {
	abs, err := filepath.Abs(p.Bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: etcdkeeper binary: %w (run make build, or pass -bin)", p.Name, err)
	}
	Binary = abs
	if p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "etcdkeeper-"+p.Name+"-"); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	r, err := NewRunner(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	if !p.Verbose {
		r.Out = io.Discard
	}
	return r, nil
}

// OnInterrupt runs stop and exits 130 on SIGINT or SIGTERM: stop stops
// every agent and etcd, so that an interrupted run leaves none behind.
func (p *Program) OnInterrupt(stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintf(os.Stderr, "%s: interrupted: stopping the clusters; logs in %s\n", p.Name, p.Dir)
		stop()
		os.Exit(130)
	}()
}

// Exit ends a run and returns its exit status: a failed run keeps the work
// dir and says where, a passing one removes it unless Keep.
func (p *Program) Exit(failed bool) int {
	switch {
	case failed:
		fmt.Fprintf(os.Stderr, "%s: FAILED: logs and data kept in %s\n", p.Name, p.Dir)
		return 1
	case p.Keep:
		fmt.Fprintf(os.Stderr, "%s: logs and data kept in %s\n", p.Name, p.Dir)
	default:
		if err := os.RemoveAll(p.Dir); err != nil {
			fmt.Fprintf(os.Stderr, "%s: removing the work dir: %v\n", p.Name, err)
		}
	}
	return 0
}
