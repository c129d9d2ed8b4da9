package repair

import (
	"fmt"
	"strings"
)

// Class is what kind of failure ended an etcd process, and so what the agent
// may do about it.
type Class int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=Class -linecomment
const (
	// ClassNone: etcd stopped cleanly (exit 0, or SIGTERM/SIGINT it handled).
	ClassNone Class = iota // none
	// ClassCorrupt: the member's data is damaged; repairable by rejoining
	// with an empty data dir.
	ClassCorrupt // corrupt
	// ClassRemoved: the member was removed from the cluster or its data dir
	// has the wrong identity (cluster ID mismatch); same rejoin path.
	ClassRemoved // removed
	// ClassMisconfig: flags, permissions, certificates, ports, versions.
	// Never move data for these: a fresh data dir fails the same way.
	ClassMisconfig // misconfig
	// ClassResource: the host, not the data: disk or quota full, the disk
	// or file system failing (EIO, ESTALE, ENOTCONN), memory, address space
	// (mmap) or file descriptors exhausted. Moving data aside does not help:
	// restart with backoff, never move data; the member stays unhealthy
	// and alerts.
	ClassResource // resource
	// ClassTransient: peers, leader or locks; retry with backoff.
	ClassTransient // transient
	// ClassUnknown: a crash we cannot explain (signal, unknown panic), or
	// an exit whose only clues are about other members.
	ClassUnknown // unknown
)

// Exit is how an etcd process ended.
type Exit struct {
	// Code is the exit status; meaningless when Signal is set.
	Code int
	// Signal is the signal that killed the process ("SIGKILL", or Go's
	// spelling "killed"); "" if it exited normally.
	Signal string
	// Tail holds the last log lines of etcd: zap JSON lines, or plain text
	// (flag errors, "panic: ..." and goroutine stacks).
	Tail []string
	// OOM: the kernel's OOM killer sent the SIGKILL (etcd's memory
	// cgroup counted the kill).
	OOM bool
}

// Verdict is the classification of one Exit.
type Verdict struct {
	Class Class
	// Reason is one human-readable line.
	Reason string
	// Evidence is the log line (or error field) that decided.
	Evidence string
}

// Classify explains why etcd exited. It is pure: it looks only at e.
func Classify(e Exit) Verdict {
	lines := parseTail(e.Tail)
	if e.OOM {
		return Verdict{Class: ClassResource, Reason: "etcd was killed by the kernel's OOM killer: the host (or etcd's memory cgroup) ran out of memory; not evidence of corruption. " +
			"etcd's memory grows with its data and with snapshot-count (the raft entries it keeps in memory): lower snapshot-count, raise the memory limit, or move other work off the host",
			Evidence: "SIGKILL, and the memory cgroup's oom_kill count rose"}
	}
	if e.Signal != "" {
		return classifySignal(normalizeSignal(e.Signal), lines)
	}
	if e.Code == 0 {
		return classifyCleanExit(lines)
	}
	return classifyFailure(e.Code, lines)
}

// classifySignal: etcd traps SIGTERM/SIGINT, shuts down, then re-raises the
// signal (pkg/osutil/interrupt_unix.go), so a polite stop ends "by signal".
// Anything else (SIGKILL from an operator or the OOM killer, SIGSEGV, ...)
// is a crash that says nothing about the data, unless etcd had said why it
// was stuck: it waits forever for a db flock held by another process.
func classifySignal(sig string, lines []logLine) Verdict {
	if sig == "SIGTERM" || sig == "SIGINT" {
		return Verdict{Class: ClassNone, Reason: "etcd stopped on " + sig, Evidence: "signal: " + sig}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if v, ok := lockedRule.verdict(lines[i]); ok {
			v.Reason = oneLine("etcd was killed by " + sig + " while waiting: " + v.Reason)
			return v
		}
	}
	return Verdict{
		Class:    ClassUnknown,
		Reason:   "etcd was killed by " + sig + " (operator or OOM killer); not evidence of corruption",
		Evidence: "signal: " + sig,
	}
}

// classifyCleanExit: a removed member exits with status 0 after logging
// "the member has been permanently removed from the cluster"
// (etcdserver/server.go run(), checked with v3.7.3).
func classifyCleanExit(lines []logLine) Verdict {
	for i := len(lines) - 1; i >= 0; i-- {
		if v, ok := removedRule.verdict(lines[i]); ok {
			return v
		}
	}
	return Verdict{Class: ClassNone, Reason: "etcd exited cleanly (status 0)"}
}

// classifyFailure trusts etcd's own last word first (a zap Fatal or Panic
// line), then a Go crash in the tail, then the other error and warning
// lines, newest first.
func classifyFailure(code int, lines []logLine) Verdict {
	candidates := bySeverity(lines)
	for _, l := range candidates {
		if l.isFatal() {
			if v, ok := classifyLine(l); ok {
				return v
			}
		}
	}
	if c, ok := findCrash(lines); ok {
		return c.verdict(code)
	}
	for _, l := range candidates {
		if v, ok := classifyLine(l); ok {
			return v
		}
	}
	return unexplained(code, lines, candidates)
}

// unexplained keeps the most severe line, or else the last one, as evidence.
func unexplained(code int, lines, candidates []logLine) Verdict {
	v := Verdict{Class: ClassUnknown, Reason: fmt.Sprintf("etcd exited with status %d and no recognised error", code)}
	switch {
	case len(candidates) > 0:
		v.Evidence = oneLine(candidates[0].raw)
	case len(lines) > 0:
		v.Evidence = oneLine(lines[len(lines)-1].raw)
	default:
		v.Evidence = fmt.Sprintf("exit status %d, empty log", code)
	}
	return v
}

// oneLine keeps Reason and Evidence to one bounded line.
func oneLine(s string) string {
	const max = 600
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// normalizeSignal maps "SIGKILL", "kill" and Go's os.ProcessState spelling
// ("signal: killed") to "SIGKILL"; other signals are returned trimmed.
func normalizeSignal(s string) string {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "signal:"))
	switch strings.ToLower(s) {
	case "killed", "kill", "sigkill":
		return "SIGKILL"
	case "terminated", "term", "sigterm":
		return "SIGTERM"
	case "interrupt", "int", "sigint":
		return "SIGINT"
	}
	return s
}
