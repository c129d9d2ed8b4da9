package etcdproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ProcState is what the kernel says a process is doing, over all its
// threads (/proc/PID/task/*/stat).
type ProcState int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=ProcState -linecomment
const (
	// ProcActive: running or sleeping; it can act on signals.
	ProcActive ProcState = iota // active
	// ProcStopped: every thread stopped (state T: SIGSTOP, SIGTSTP; t: a
	// tracer). It cannot act on SIGTERM until continued; SIGKILL ends it.
	ProcStopped // stopped
	// ProcDiskSleep: some thread in uninterruptible sleep (state D: waiting
	// on I/O, a hung disk or NFS). Its CPU time stands still because it
	// waits, not because it is frozen, and no signal acts before the I/O
	// returns.
	ProcDiskSleep // disk-sleep
	// ProcGone: no such process, or only a zombie.
	ProcGone // gone
)

// ProcSample is one look at a process: its state and the CPU time it has
// used.
type ProcSample struct {
	State ProcState
	// Letter is the state letter of the process (its main thread).
	Letter byte
	// CPU is user + system time in clock ticks (/proc/PID/stat), RunNS
	// the time its live threads ran, in nanoseconds (their schedstat; 0
	// where the kernel has none). A mostly idle etcd runs microseconds
	// per raft tick: whole clock ticks may not move for a while, RunNS
	// does.
	CPU   uint64
	RunNS uint64
}

// ReadProc looks at process pid in /proc.
func ReadProc(pid int) (ProcSample, error) { return readProc("/proc", pid) }

func readProc(root string, pid int) (ProcSample, error) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if os.IsNotExist(err) {
		return ProcSample{State: ProcGone}, nil
	}
	if err != nil {
		return ProcSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	letter, cpu, err := parseStat(string(b))
	if err != nil {
		return ProcSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	x := ProcSample{Letter: letter, CPU: cpu}
	letters := []byte{letter}
	if tasks, err := filepath.Glob(filepath.Join(dir, "task", "*")); err == nil && len(tasks) > 0 {
		letters = letters[:0]
		for _, t := range tasks {
			if tb, err := os.ReadFile(filepath.Join(t, "stat")); err == nil {
				if l, _, err := parseStat(string(tb)); err == nil {
					letters = append(letters, l)
				}
			}
			if sb, err := os.ReadFile(filepath.Join(t, "schedstat")); err == nil {
				x.RunNS += parseSchedstat(string(sb))
			}
		}
	}
	x.State = ClassifyStates(letters)
	return x, nil
}

// parseSchedstat is the first field of /proc/PID/task/TID/schedstat: the
// nanoseconds the thread ran (0 when unreadable).
func parseSchedstat(s string) uint64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(f[0], 10, 64)
	return n
}

// parseStat reads the state letter and utime+stime from a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may itself hold
// spaces and parentheses: the fields are counted after its last ")".
func parseStat(s string) (byte, uint64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat %q: no command name", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("stat %q: too few fields", s)
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat stime: %w", err)
	}
	return f[0][0], utime + stime, nil
}

// ClassifyStates is the state of a process from its threads' state
// letters: one thread in D makes it ProcDiskSleep (a stop takes effect
// only once the I/O returns, so it is not frozen); it is ProcStopped only
// when every live thread is stopped.
func ClassifyStates(letters []byte) ProcState {
	live, stopped := 0, 0
	for _, l := range letters {
		switch l {
		case 'D':
			return ProcDiskSleep
		case 'Z', 'X', 'x':
			continue
		case 'T', 't':
			stopped++
		}
		live++
	}
	switch {
	case live == 0:
		return ProcGone
	case stopped == live:
		return ProcStopped
	}
	return ProcActive
}

// Stillness follows a silent process across looks: how long it has been
// stopped, and how long neither its CPU time nor its data dir moved. It
// is pure: the caller supplies the time and what it saw.
type Stillness struct {
	seen         bool
	cpu, run     uint64
	data         string
	stoppedSince time.Time
	stillSince   time.Time
}

// Observe takes one look: the process sample and a stamp of its data dir
// (anything that changes when etcd writes: sizes and mtimes). It returns
// for how long the process has been seen stopped and for how long it has
// been still (0 at the first look).
func (s *Stillness) Observe(at time.Time, p ProcSample, data string) (stoppedFor, stillFor time.Duration) {
	moved := !s.seen || p.CPU != s.cpu || p.RunNS != s.run || data != s.data
	s.seen, s.cpu, s.run, s.data = true, p.CPU, p.RunNS, data
	if p.State != ProcStopped {
		s.stoppedSince = time.Time{}
	} else if s.stoppedSince.IsZero() {
		s.stoppedSince = at
	}
	// A process waiting on I/O is not still: it waits on the disk, and
	// killing it would neither work nor help.
	if moved || p.State == ProcDiskSleep || p.State == ProcGone {
		s.stillSince = at
	}
	if !s.stoppedSince.IsZero() {
		stoppedFor = at.Sub(s.stoppedSince)
	}
	return stoppedFor, at.Sub(s.stillSince)
}

// Reset forgets what was seen: the process answered, or is another one.
func (s *Stillness) Reset() { *s = Stillness{} }
