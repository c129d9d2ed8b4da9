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

// ConfirmAfter is when, after "applied snapshot" with no publish yet, the
// watch asks PublishHooks.Confirm whether the member is stalled; and
// confirmGrace how long after a confirming answer the publish may still
// come before the stall counts. etcd logs "applied snapshot" once the
// snapshot's membership is in place, so Confirm can tell at once; a
// member that is not stalled publishes within a few milliseconds of the
// snapshot, and the grace is for a publish applied right after the
// snapshot whose log line is still on its way.
const (
	ConfirmAfter = 2 * time.Millisecond
	confirmGrace = 10 * time.Millisecond
)

// PublishHooks are the callbacks of a process's publish watch, each
// optional and called from another goroutine.
type PublishHooks struct {
	// OnStall is called once when etcd is found stalled.
	OnStall func()
	// OnPublished is called each time etcd logs that it published itself:
	// it serves clients from then on.
	OnPublished func()
	// Confirm reports whether etcd's own membership, shortly after the
	// snapshot it applied, already holds its own published attributes
	// (name and client URLs): then the publish it waits for was inside
	// the snapshot, unless it was applied right after it and its log
	// line is still on its way (the grace covers that). false when it
	// cannot tell; the stall then counts after StallAfter.
	Confirm func() bool
}

// etcd's log messages the watcher looks for (server/etcdserver/server.go,
// v3.7.3), both at level info.
const (
	msgAppliedSnapshot = `"msg":"applied snapshot"`
	msgPublished       = `"msg":"published local member to cluster through raft"`
	// msgReceiving (rafthttp, info) starts the reception of a snapshot
	// the leader cut just before it sent it; msgPublishFailed (warn) ends
	// one publish attempt, and etcd's publish loop begins the next at once.
	msgReceiving     = `"msg":"receiving database snapshot"`
	msgPublishFailed = `"msg":"failed to publish local member to cluster through raft"`
)

// publishWatch detects etcd's publish stall (docs/etcd-publish-stall.md):
// a new member that was sent a snapshot containing its own pending
// publish logs "applied snapshot" and then nothing until its publish
// request times out (7 s by default), and it serves no client until then.
// A member that is not stalled logs "published local member to cluster
// through raft" right after the snapshot. The watcher is fed every line
// of the process's log and calls OnStall once when the snapshot was not
// followed by the publish within StallAfter, or sooner when Confirm
// proves the stall; not when etcd's pending attempt began after the
// snapshot's reception began (a retry, which the snapshot cannot hold:
// at 1 GB the first attempt always times out while the snapshot streams).
type publishWatch struct {
	after time.Duration
	hooks PublishHooks
	// stalled is closed when the stall is first seen (by the timer or
	// by Confirm); it stays closed when a late publish ends the stall,
	// so Stalled is the state.
	stalled chan struct{}
	once    sync.Once

	mu       sync.Mutex
	snapshot time.Time // when the last "applied snapshot" was seen; zero: none
	// receiving is when the last snapshot's reception began, retried when
	// the last publish attempt failed (and the next began); zero: none.
	receiving, retried time.Time
	published          bool
	confirmed          bool // Confirm proved the stall
	timer              *time.Timer
	ended              bool
}

func newPublishWatch(after time.Duration, hooks PublishHooks) *publishWatch {
	return &publishWatch{after: after, hooks: hooks, stalled: make(chan struct{})}
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
		if w.hooks.OnPublished != nil {
			w.hooks.OnPublished()
		}
	case strings.Contains(line, msgReceiving):
		w.mu.Lock()
		w.receiving = now
		w.mu.Unlock()
	case strings.Contains(line, msgPublishFailed):
		w.mu.Lock()
		w.retried = now
		w.mu.Unlock()
	case strings.Contains(line, msgAppliedSnapshot):
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.published {
			return // a member that serves already: no publish is pending
		}
		if !w.receiving.IsZero() && !w.retried.Before(w.receiving) {
			// The pending attempt began after the leader cut this
			// snapshot (its reception had begun): it is not inside it,
			// and it is applied from the log that follows the snapshot,
			// later when that backlog is long (a large db takes longer
			// to send than etcd's 7 s publish timeout, so its first
			// attempt has failed by then). No stall to cut short:
			// restarting would only reopen the db.
			return
		}
		w.snapshot = now
		if w.timer == nil {
			w.timer = time.AfterFunc(w.after, w.fire)
			if w.hooks.Confirm != nil {
				go w.confirm()
			}
		}
	}
}

// confirm asks Confirm, shortly after the snapshot, whether the stall is
// certain, and fires at once when it is and the publish has still not
// come.
func (w *publishWatch) confirm() {
	time.Sleep(ConfirmAfter)
	if w.done() || !w.hooks.Confirm() {
		return
	}
	time.Sleep(confirmGrace)
	w.mu.Lock()
	if w.published || w.ended {
		w.mu.Unlock()
		return
	}
	w.confirmed = true
	w.mu.Unlock()
	w.fire()
}

// done: the publish came or the process ended.
func (w *publishWatch) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.published || w.ended
}

func (w *publishWatch) fire() {
	if !w.Stalled(time.Now()) {
		return
	}
	first := false
	w.once.Do(func() { close(w.stalled); first = true })
	if first && w.hooks.OnStall != nil {
		w.hooks.OnStall()
	}
}

// Stalled reports whether, at now, etcd has applied a snapshot and has not
// published itself for longer than the watcher's limit.
func (w *publishWatch) Stalled(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.published && !w.snapshot.IsZero() && (w.confirmed || now.Sub(w.snapshot) >= w.after)
}

// stop stops the timer when the process has ended.
func (w *publishWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
