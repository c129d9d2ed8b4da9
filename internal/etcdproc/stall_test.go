package etcdproc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// etcd v3.7.3's lines, shortened.
const (
	lineApplied   = `{"level":"info","ts":"2026-11-30T15:21:04.101Z","caller":"etcdserver/server.go:1010","msg":"applied snapshot","incoming-leader-snapshot-index":160}`
	linePublished = `{"level":"info","ts":"2026-11-30T15:21:04.102Z","caller":"etcdserver/server.go:1828","msg":"published local member to cluster through raft","local-member-id":"ac96b302afc49034"}`
	lineFailed    = `{"level":"warn","ts":"2026-11-30T15:21:11.058Z","caller":"etcdserver/server.go:1838","msg":"failed to publish local member to cluster through raft","error":"etcdserver: request timed out"}`
	lineOther     = `{"level":"info","ts":"2026-11-30T15:21:04.100Z","msg":"restored mvcc store"}`
	lineReceiving = `{"level":"info","ts":"2026-12-01T21:20:56.120Z","caller":"rafthttp/http.go:269","msg":"receiving database snapshot","local-member-id":"b485dc6d7dbb83c6","remote-snapshot-sender-id":"a18c27a02f7b9cf0","incoming-snapshot-index":10561}`
)

func TestPublishWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type feed struct {
		line string
		at   time.Time
	}
	tests := []struct {
		name  string
		lines []feed
		at    time.Time
		want  bool
	}{
		{"no snapshot: a member with data, or one that got the log", []feed{{lineOther, ms(0)}, {linePublished, ms(1)}}, ms(5000), false},
		{"snapshot, then published at once", []feed{{lineApplied, ms(0)}, {linePublished, ms(0)}}, ms(5000), false},
		{"snapshot, publish pending, still within the limit", []feed{{lineApplied, ms(0)}}, ms(99), false},
		{"snapshot, no publish after the limit: stalled", []feed{{lineApplied, ms(0)}, {lineOther, ms(1)}}, ms(100), true},
		{"stalled, and the first attempt failed: still stalled", []feed{{lineApplied, ms(0)}, {lineFailed, ms(6958)}}, ms(6960), true},
		{"stalled until the retry published", []feed{{lineApplied, ms(0)}, {lineFailed, ms(6958)}, {linePublished, ms(6961)}}, ms(7000), false},
		{"a snapshot after it published (a slow member later): no publish pending", []feed{{linePublished, ms(0)}, {lineApplied, ms(60000)}}, ms(70000), false},
		// A large db streams for longer than the publish timeout (1 GB:
		// ~10 s here): the first attempt fails meanwhile and etcd's retry
		// begins after the leader cut the snapshot, so the snapshot cannot
		// hold it; it is applied from the backlog that follows.
		{"the attempt pending began while the snapshot streamed: not stalled however long the backlog", []feed{{lineReceiving, ms(0)}, {lineFailed, ms(6000)}, {lineApplied, ms(10000)}}, ms(15000), false},
		{"the attempt pending began before the snapshot streamed: stalled", []feed{{lineFailed, ms(0)}, {lineReceiving, ms(100)}, {lineApplied, ms(3000)}}, ms(3100), true},
		{"a second snapshot after a retry during the first: that retry may be inside it", []feed{{lineReceiving, ms(0)}, {lineFailed, ms(6000)}, {lineReceiving, ms(6500)}, {lineApplied, ms(9000)}}, ms(9100), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newPublishWatch(StallAfter, PublishHooks{})
			for _, f := range tt.lines {
				w.line(f.line, f.at)
			}
			if got := w.Stalled(tt.at); got != tt.want {
				t.Errorf("Stalled = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPublishWatchSignals runs a real process that logs etcd's lines: the
// supervisor's callback fires for the one that stalls, and the one that
// publishes is not stalled however long it waits.
func TestPublishWatchSignals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  bool
	}{
		{"stalls", []string{lineOther, lineApplied}, true},
		{"publishes", []string{lineApplied, linePublished}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "etcd.sh")
			body := "#!/bin/sh\n"
			for _, l := range tt.lines {
				body += fmt.Sprintf("echo '%s' >&2\n", l)
			}
			body += "exec sleep 60\n"
			if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
				t.Fatal(err)
			}
			fired := make(chan struct{}, 2)
			s := NewSupervisor(zap.NewNop(), filepath.Join(dir, "etcd.pid"), 5*time.Second)
			s.Publish.OnStall = func() { fired <- struct{}{} }
			published := make(chan struct{}, 2)
			s.Publish.OnPublished = func() { published <- struct{}{} }
			p, err := s.Start(Command{Path: script}, filepath.Join(dir, "data"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = s.Stop() }()
			if tt.want {
				select {
				case <-fired:
				case <-time.After(30 * time.Second):
					t.Fatal("no stall signalled")
				}
				if !p.LostPublishRace() {
					t.Error("signalled, but LostPublishRace is false")
				}
				<-p.PublishStalled()
				// Restart: the same command again, a new process whose
				// watcher starts over.
				_, p2, err := s.Restart(filepath.Join(dir, "data"))
				if err != nil {
					t.Fatal(err)
				}
				if p2 == p || p.Running() || !p2.Running() {
					t.Fatalf("Restart did not replace the process")
				}
				return
			}
			// Once the watcher has seen the publish (its hook ran: the
			// tail holding both lines is not enough, it takes each line
			// before the watcher does), the publish settles it for good
			// (checked an hour on, no sleep).
			select {
			case <-published:
			case <-time.After(30 * time.Second):
				t.Fatal("the publish was not seen")
			}
			waitFor(t, func() bool { return len(p.tail.lines()) == len(tt.lines) })
			if p.publish.Stalled(time.Now().Add(time.Hour)) {
				t.Error("stalled for an etcd that published")
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPassThroughLevel(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := zap.New(core)
	passThrough(lg, lineApplied, zapcore.WarnLevel)
	passThrough(lg, lineFailed, zapcore.WarnLevel)
	passThrough(lg, lineApplied, zapcore.InfoLevel)
	got := []string{}
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	want := []string{"failed to publish local member to cluster through raft", "applied snapshot"}
	if !slices.Equal(got, want) {
		t.Errorf("passed through %q, want %q", got, want)
	}
}

// TestLogLevel: etcd runs at info at most, so that the agent sees the
// lines the publish watcher needs; the spec's level decides what is
// passed through.
func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		flags    map[string]string
		wantFlag string
		pass     zapcore.Level
	}{
		{nil, "", zapcore.InfoLevel},
		{map[string]string{"log-level": "debug"}, "--log-level=debug", zapcore.DebugLevel},
		{map[string]string{"log-level": "info"}, "--log-level=info", zapcore.InfoLevel},
		{map[string]string{"log-level": "warn"}, "--log-level=info", zapcore.WarnLevel},
		{map[string]string{"log-level": "error"}, "--log-level=info", zapcore.ErrorLevel},
	} {
		s := &spec.Spec{Cluster: spec.Cluster{Name: "c"}, Etcd: spec.Etcd{Flags: tt.flags}}
		c := CommandFor(s, spec.Member{Name: "n1"}, AsIs(), "/bin/etcdkeeper", nil)
		var got string
		for _, a := range c.Args {
			if len(a) > 12 && a[:12] == "--log-level=" {
				got = a
			}
		}
		if got != tt.wantFlag || c.PassLevel != tt.pass {
			t.Errorf("log-level %v: flag %q, pass %v; want %q, %v", tt.flags, got, c.PassLevel, tt.wantFlag, tt.pass)
		}
		if slices.Contains(c.Args, "--log-level=warn") {
			t.Errorf("etcd runs at warn: the publish watcher is blind")
		}
	}
}

// TestPublishWatchConfirm: after "applied snapshot" without a publish the
// watch asks Confirm, and counts the stall at once only when Confirm
// proves it and the publish still has not come.
func TestPublishWatchConfirm(t *testing.T) {
	tests := []struct {
		name string
		// confirm answers; publishDuring logs the publish while it asks
		// (a publish applied right after the snapshot); ended: the
		// process exited first.
		confirm, publishDuring, ended bool
		want                          bool
	}{
		{"the snapshot held the publish: stalled at once", true, false, false, true},
		{"the snapshot did not hold it", false, false, false, false},
		{"held it, but the publish was logged meanwhile", true, true, false, false},
		{"the process ended first", true, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fired := 0
			w := newPublishWatch(time.Hour, PublishHooks{OnStall: func() { fired++ }})
			snap := time.Now()
			w.line(lineApplied, snap) // no Confirm yet: the test calls it itself
			w.hooks.Confirm = func() bool {
				if tt.publishDuring {
					w.line(linePublished, time.Now())
				}
				return tt.confirm
			}
			if tt.ended {
				w.stop()
			}
			w.confirm()
			// Long before StallAfter (an hour here): only Confirm can
			// make it stalled.
			if got := w.Stalled(snap.Add(time.Millisecond)); got != tt.want {
				t.Errorf("Stalled = %v, want %v", got, tt.want)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.want]; fired != want {
				t.Errorf("OnStall called %d times, want %d", fired, want)
			}
			w.stop()
		})
	}
}

// TestPublishWatchOnPublished: each publish line is passed on.
func TestPublishWatchOnPublished(t *testing.T) {
	n := 0
	w := newPublishWatch(StallAfter, PublishHooks{OnPublished: func() { n++ }})
	for _, l := range []string{lineOther, lineApplied, linePublished, lineOther} {
		w.line(l, time.Now())
	}
	if n != 1 {
		t.Errorf("OnPublished called %d times, want 1", n)
	}
	w.stop()
}

// TestPublishWatchLatePublish: a publish that comes after the stall was
// seen (confirmed, or after StallAfter) ends it: the agent must then not
// treat the member as stalled (nor cut its status calls short).
func TestPublishWatchLatePublish(t *testing.T) {
	for _, confirmed := range []bool{true, false} {
		w := newPublishWatch(StallAfter, PublishHooks{})
		snap := time.Now()
		w.line(lineApplied, snap)
		at := snap.Add(StallAfter)
		if confirmed {
			w.hooks.Confirm = func() bool { return true }
			w.confirm()
			at = snap.Add(time.Millisecond)
		}
		if !w.Stalled(at) {
			t.Fatalf("confirmed %v: not stalled before the publish", confirmed)
		}
		w.line(linePublished, at)
		if w.Stalled(at.Add(time.Hour)) {
			t.Errorf("confirmed %v: still stalled after a late publish", confirmed)
		}
		if confirmed {
			select {
			case <-w.stalled: // stays closed: Stalled is the state
			default:
				t.Errorf("confirmed: the stall was never signalled")
			}
		}
		w.stop()
	}
}

// TestPublishWatchRetryNotConfirmed: for a snapshot whose reception began
// before the pending attempt, neither the timer nor Confirm (which would
// find the first, failed attempt's attributes inside the snapshot) is
// started: such a member is never restarted for a stall.
func TestPublishWatchRetryNotConfirmed(t *testing.T) {
	asked := false
	w := newPublishWatch(StallAfter, PublishHooks{Confirm: func() bool { asked = true; return true }})
	now := time.Now()
	for _, l := range []string{lineReceiving, lineFailed, lineApplied} {
		w.line(l, now)
	}
	w.mu.Lock()
	timer := w.timer
	w.mu.Unlock()
	if timer != nil || asked {
		t.Errorf("timer started %v, Confirm asked %v: want neither", timer != nil, asked)
	}
	w.stop()
}
