package repair

import (
	"fmt"
	"strings"
)

// crash is a Go panic or fatal runtime error found in etcd's output.
type crash struct {
	header string   // "panic: ...", "fatal error: ...", or "" if cut off the tail
	frames []string // the crashing goroutine's stack, or every trace line if the header is gone
}

// findCrash: on a panic the Go runtime prints the header and the panicking
// goroutine; on a fatal error (a fault on bbolt's mmap: SIGBUS, exit 2) it
// prints the faulting goroutine first and then all the others, so a short
// tail often holds only the others.
func findCrash(lines []logLine) (crash, bool) {
	for i, l := range lines {
		if l.isGoPanic() {
			return crash{header: strings.TrimSpace(l.raw), frames: firstGoroutine(lines[i+1:])}, true
		}
	}
	var c crash
	for _, l := range lines {
		if l.stack {
			c.frames = append(c.frames, l.raw)
		}
	}
	return c, len(c.frames) > 0
}

// firstGoroutine returns the trace lines up to the end of the first
// goroutine block after a panic header.
func firstGoroutine(lines []logLine) []string {
	var frames []string
	seen := false
	for _, l := range lines {
		t := strings.TrimSpace(l.raw)
		if !l.stack {
			if seen || l.json {
				break
			}
			continue
		}
		if strings.HasPrefix(t, "goroutine ") {
			if seen {
				break
			}
			seen = true
		}
		frames = append(frames, l.raw)
	}
	return frames
}

// verdict: bbolt panics, or faults on its mmap, when it walks a damaged page
// (etcd-failure-signals.md: "bbolt page panics (exit 2)"), so a crashing
// goroutine inside go.etcd.io/bbolt means a corrupt db. Any other crash is
// unexplained, and a crash outranks the warnings logged before it.
func (c crash) verdict(code int) Verdict {
	if c.header != "" {
		if v, ok := classifyLine(logLine{raw: c.header}); ok {
			return v
		}
	}
	evidence := c.header
	for _, f := range c.frames {
		if strings.Contains(f, "go.etcd.io/bbolt.") {
			if evidence == "" {
				evidence = strings.TrimSpace(f)
			}
			return Verdict{
				Class:    ClassCorrupt,
				Reason:   oneLine("bbolt crashed reading the database: " + evidence),
				Evidence: oneLine(evidence),
			}
		}
	}
	if evidence == "" {
		evidence = "goroutine dump without its header"
	}
	return Verdict{
		Class:    ClassUnknown,
		Reason:   oneLine(fmt.Sprintf("etcd crashed (status %d): %s", code, evidence)),
		Evidence: oneLine(evidence),
	}
}
