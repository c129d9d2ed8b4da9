package repair

import (
	"encoding/json"
	"slices"
	"strings"
)

// logLine is one line of etcd's output: a zap JSON record or plain text.
type logLine struct {
	raw   string
	json  bool
	level string // zap level: "fatal", "panic", "error", "warn", "info", ...
	msg   string // zap "msg": a constant in etcd's source, so compared exactly
	err   string // zap "error" field; for bbolt's own lines, their msg
	stack bool   // plain text inside a Go stack trace
	// fields are all of a JSON line's fields (member IDs: see blame).
	fields map[string]any
}

// parseTail parses the lines and marks the plain-text lines of Go stack
// traces: file paths and function names in frames must not match any rule.
func parseTail(tail []string) []logLine {
	lines := make([]logLine, 0, len(tail))
	inStack := false
	for _, s := range tail {
		l := parseLine(s)
		switch {
		case l.json:
			inStack = false
		case l.isGoPanic():
			inStack = true
		case inStack || isTraceLine(s):
			l.stack = true
		}
		lines = append(lines, l)
	}
	return lines
}

// isTraceLine recognises the lines of a goroutine dump, so that a tail cut
// after the panic header is still read as a crash:
//
//	goroutine 125 gp=0xc00021eb40 m=0 mp=0x258e6c0 [running]:
//	go.etcd.io/bbolt.(*Tx).page(0xc0004aa0e0, 0xce)
//		/root/go/pkg/mod/go.etcd.io/bbolt@v1.5.0/tx.go:640 +0x139
//	created by go.etcd.io/bbolt.(*DB).freepages in goroutine 95
func isTraceLine(s string) bool {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "goroutine ") && strings.HasSuffix(t, "]:"),
		strings.HasPrefix(t, "created by "),
		strings.HasPrefix(t, "[signal "),
		strings.HasPrefix(t, "...") && strings.HasSuffix(t, "elided..."),
		s != t && strings.Contains(t, ".go:"):
		return true
	}
	// A frame: "pkg/path.Func(args)" with no space before the first "(".
	open := strings.IndexByte(t, '(')
	return open > 0 && !strings.ContainsAny(t[:open], " \t") && strings.HasSuffix(t, ")")
}

func parseLine(s string) logLine {
	l := logLine{raw: s}
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") {
		return l
	}
	var fields map[string]any
	if json.Unmarshal([]byte(t), &fields) != nil {
		return l
	}
	l.json = true
	l.fields = fields
	l.level, _ = fields["level"].(string)
	l.msg, _ = fields["msg"].(string)
	l.err, _ = fields["error"].(string)
	if logger, _ := fields["logger"].(string); logger == "bbolt" && l.err == "" {
		// bbolt logs through etcd's zap logger printf-style (Errorf): its
		// msg is not a constant but carries the error text, e.g.
		// "[GOOS: linux, GOARCH: amd64] mmap failed, size: N, error: ...".
		l.err = l.msg
	}
	return l
}

// isGoPanic: the Go runtime prints "panic: ..." (also after a zap Panic,
// exit status 2) or "fatal error: ..." / "unexpected fault address" (a fault
// on bbolt's mmap) as plain text.
func (l logLine) isGoPanic() bool {
	if l.json {
		return false
	}
	t := strings.TrimSpace(l.raw)
	return strings.HasPrefix(t, "panic: ") ||
		strings.HasPrefix(t, "fatal error: ") ||
		strings.HasPrefix(t, "unexpected fault address")
}

// isFatal: a zap Fatal (exit 1) or Panic (exit 2) line, etcd's last word.
func (l logLine) isFatal() bool {
	return l.json && (l.level == "fatal" || l.level == "panic" || l.level == "dpanic")
}

// severity orders the lines that may decide a failure; -1 means never.
// Info and debug lines never decide: etcd logs recoverable events there
// ("repaired WAL" carries an "unexpected EOF" error field).
func (l logLine) severity() int {
	switch {
	case l.stack || strings.TrimSpace(l.raw) == "":
		return -1
	case l.isFatal():
		return 0
	case l.isGoPanic():
		return 1
	case l.json && l.level == "error":
		return 2
	case l.json && l.level == "warn":
		return 3
	case !l.json:
		return 4 // flag errors and other plain text
	}
	return -1
}

// bySeverity returns the deciding candidates: most severe first, and within
// one severity the newest first.
func bySeverity(lines []logLine) []logLine {
	var out []logLine
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].severity() >= 0 {
			out = append(out, lines[i])
		}
	}
	slices.SortStableFunc(out, func(a, b logLine) int { return a.severity() - b.severity() })
	return out
}
