package etcdproc

import (
	"strings"
	"sync"
	"time"
)

// StallAfter is how long a member may go from applying a snapshot sent by
// the leader to publishing itself before it counts as stalled. In runs
// that do not stall the two log lines are less than a millisecond apart
// (docs/etcd-publish-stall.md).
const StallAfter = 100 * time.Millisecond

// etcd's log messages the watcher looks for (server/etcdserver/server.go,
// v3.7.3), both at level info.
const (
	msgAppliedSnapshot = `"msg":"applied snapshot"`
	msgPublished       = `"msg":"published local member to cluster through raft"`
)

// publishWatch detects etcd's publish stall (docs/etcd-publish-stall.md):
// a new member that was sent a snapshot containing its own pending
// publish logs "applied snapshot" and then nothing until its publish
// request times out (7 s by default), and it serves no client until then.
// A member that is not stalled logs "published local member to cluster
// through raft" right after the snapshot. The watcher is fed every line
// of the process's log and calls onStall once when the snapshot was not
// followed by the publish within StallAfter.
type publishWatch struct {
	after   time.Duration
	onStall func()
	// stalled is closed when the stall is first seen by the timer.
	stalled chan struct{}
	once    sync.Once

	mu        sync.Mutex
	snapshot  time.Time // when the last "applied snapshot" was seen; zero: none
	published bool
	timer     *time.Timer
}

func newPublishWatch(after time.Duration, onStall func()) *publishWatch {
	return &publishWatch{after: after, onStall: onStall, stalled: make(chan struct{})}
}

// line takes one log line, at time now.
func (w *publishWatch) line(line string, now time.Time) {
	switch {
	case strings.Contains(line, msgPublished):
		w.mu.Lock()
		w.published = true
		if w.timer != nil {
			w.timer.Stop()
		}
		w.mu.Unlock()
	case strings.Contains(line, msgAppliedSnapshot):
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.published {
			return // a member that serves already: no publish is pending
		}
		w.snapshot = now
		if w.timer == nil {
			w.timer = time.AfterFunc(w.after, w.fire)
		}
	}
}

func (w *publishWatch) fire() {
	if !w.Stalled(time.Now()) {
		return
	}
	w.once.Do(func() { close(w.stalled) })
	if w.onStall != nil {
		w.onStall()
	}
}

// Stalled reports whether, at now, etcd has applied a snapshot and has not
// published itself for longer than the watcher's limit.
func (w *publishWatch) Stalled(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.published && !w.snapshot.IsZero() && now.Sub(w.snapshot) >= w.after
}

// stop stops the timer when the process has ended.
func (w *publishWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}
