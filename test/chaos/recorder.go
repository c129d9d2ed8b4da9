package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// recorder is etcd's history of the clients' keys, read as it happens: a
// watch from revision 1 opened before the first client operation and kept
// for the whole run, begun again from the next revision it has not read
// whenever it breaks (a member killed or cut off, no leader), the next
// revision advanced by the watch's progress notices too. The NOSPACE
// procedure compacts the cluster, after which etcd itself no longer has
// the revisions before the compaction; the recorder read them before it,
// so the history checks (lost writes, unknown outcomes) still see every
// write the run produced. A compaction the recorder had not read up to
// yet is a gap, and the run fails on it (historyProblems): a check that
// cannot see every revision vouches for none.
type recorder struct {
	cli    *clientv3.Client
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	writes  []etcdWrite
	next    int64    // the first revision not read yet
	gaps    []string // revisions compacted before the recorder read them
	odd     []string // events out of revision order, deletes
	breaks  int      // watches begun again
	notices int      // progress notices
	// cancelWatch ends the current watch (rewatch).
	cancelWatch context.CancelFunc
}

func startRecorder(endpoints []string, keepalive bool, prefix string) (*recorder, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if keepalive {
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = time.Second, time.Second
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("history recorder: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{cli: cli, prefix: prefix, cancel: cancel, done: make(chan struct{}), next: 1}
	go r.run(ctx)
	return r, nil
}

func (r *recorder) run(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		r.mu.Lock()
		from := r.next
		r.mu.Unlock()
		// A member without a leader ends the watch (and a member cut off
		// loses it by the keepalive): the next one goes to another member.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		r.mu.Lock()
		r.cancelWatch = wcancel
		r.mu.Unlock()
		wch := r.cli.Watch(wctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		// Progress notices carry the revision the watch has read up to,
		// the other keys' writes included (the filler's, the deletes): a
		// watch begun again after a compaction starts from there, not
		// from the last write of the clients' keys, which a compaction
		// above it would take for a gap.
		go func() {
			for {
				select {
				case <-wctx.Done():
					return
				case <-time.After(200 * time.Millisecond):
					_ = r.cli.RequestProgress(wctx)
				}
			}
		}()
		for resp := range wch {
			if resp.CompactRevision > 0 {
				r.gap(resp.CompactRevision)
				break
			}
			if resp.Err() != nil {
				break
			}
			if resp.IsProgressNotify() {
				r.progress(resp.Header.Revision)
				continue
			}
			r.add(resp.Events)
		}
		wcancel()
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.breaks++
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *recorder) add(evs []*clientv3.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		w := etcdWrite{Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Rev: ev.Kv.ModRevision}
		switch {
		case ev.Type != clientv3.EventTypePut:
			r.odd = append(r.odd, fmt.Sprintf("a delete of %s at revision %d (the clients never delete)", w.Key, w.Rev))
		case w.Rev < r.next:
			r.odd = append(r.odd, fmt.Sprintf("%s=%q at revision %d after revision %d", w.Key, w.Value, w.Rev, r.next-1))
		}
		r.writes = append(r.writes, w)
		r.next = max(r.next, w.Rev+1)
	}
}

// rewatch ends the current watch, as a member killed under it would; the
// recorder begins it again from the next revision it lacks.
func (r *recorder) rewatch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelWatch != nil {
		r.cancelWatch()
	}
}

// progress: every write under the prefix up to rev has been read.
func (r *recorder) progress(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = max(r.next, rev+1)
	r.notices++
}

func (r *recorder) gap(compacted int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if compacted > r.next {
		r.gaps = append(r.gaps, fmt.Sprintf("revisions %d to %d compacted before the recorder read them", r.next, compacted-1))
		r.next = compacted
	}
}

// read is what the recorder holds now.
func (r *recorder) read() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorded{Writes: append([]etcdWrite(nil), r.writes...), Next: r.next,
		Gaps: append([]string(nil), r.gaps...), Odd: append([]string(nil), r.odd...), Breaks: r.breaks, Notices: r.notices}
}

// caughtUp is "" once the recorder has read the last write under its
// prefix (keys are only overwritten, never deleted: that is the newest of
// their mod revisions), within a second of reading which one that is.
func (r *recorder) caughtUp(ctx context.Context) string {
	cur, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Sprintf("the history recorder cannot read the keys: %v", err)
	}
	var last int64
	for _, kv := range cur.Kvs {
		last = max(last, kv.ModRevision)
	}
	// The watch delivers a moment after the write: a second for it.
	for wait := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		next := r.next
		r.mu.Unlock()
		switch {
		case next > last:
			return ""
		case time.Now().After(wait) || ctx.Err() != nil:
			return fmt.Sprintf("the history recorder has read up to revision %d of %d", next-1, last)
		}
	}
}

// halt waits (up to d) until the recorder has read every write, then
// stops it.
func (r *recorder) halt(d time.Duration) string {
	deadline := time.Now().Add(d)
	why := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		why = r.caughtUp(ctx)
		cancel()
		if why == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.cancel()
	<-r.done
	_ = r.cli.Close()
	return why
}

// recorded is the recorder's history: every put under the prefix it read,
// in the order etcd sent them.
type recorded struct {
	Writes  []etcdWrite
	Next    int64
	Gaps    []string
	Odd     []string
	Breaks  int
	Notices int
}

// etcdEnd is what etcd itself holds at the end of the run: its history
// from From (1, or the last compaction's revision) and the keys' current
// values at their mod revisions.
type etcdEnd struct {
	From    int64
	Tail    []etcdWrite
	Current []etcdWrite
}

// historyProblems checks the recorder's history against etcd's own at the
// end of the run: the recorder read every revision (no gap), in order;
// from the last compaction on (from revision 1 when nothing compacted) it
// is exactly etcd's history, write for write; and each key's last write
// in it is the key's current value at its mod revision. Then the unknown
// and refused writes are resolved, and the lost-write check runs, on the
// recorder's history, which still has the revisions a compaction removed
// from etcd. Nothing here forgives a
// compaction: a write lost, moved to another revision or reordered, before
// or after it, is a problem.
func historyProblems(rec recorded, end etcdEnd) []string {
	var out []string
	out = append(out, rec.Gaps...)
	for _, o := range rec.Odd {
		out = append(out, "the recorder read "+o)
	}
	var tail []etcdWrite
	for i, w := range rec.Writes {
		if i > 0 && w.Rev <= rec.Writes[i-1].Rev && len(rec.Odd) == 0 {
			out = append(out, fmt.Sprintf("the recorder read %s=%q at revision %d after revision %d", w.Key, w.Value, w.Rev, rec.Writes[i-1].Rev))
		}
		if w.Rev >= end.From {
			tail = append(tail, w)
		}
	}
	// The first difference says it; the rest follow from it.
	for i := 0; i < max(len(tail), len(end.Tail)); i++ {
		var diff string
		switch {
		case i >= len(end.Tail):
			diff = fmt.Sprintf("the recorder read %s=%q at revision %d, which etcd's history from revision %d does not have", tail[i].Key, tail[i].Value, tail[i].Rev, end.From)
		case i >= len(tail):
			diff = fmt.Sprintf("etcd's history has %s=%q at revision %d, which the recorder never read", end.Tail[i].Key, end.Tail[i].Value, end.Tail[i].Rev)
		case tail[i] != end.Tail[i]:
			diff = fmt.Sprintf("write %d from revision %d: the recorder read %s=%q at revision %d, etcd's history has %s=%q at revision %d",
				i+1, end.From, tail[i].Key, tail[i].Value, tail[i].Rev, end.Tail[i].Key, end.Tail[i].Value, end.Tail[i].Rev)
		}
		if diff != "" {
			out = append(out, diff)
			break
		}
	}
	last := map[string]etcdWrite{}
	for _, w := range rec.Writes {
		last[w.Key] = w
	}
	for _, c := range end.Current {
		if w, ok := last[c.Key]; !ok || w != c {
			out = append(out, fmt.Sprintf("%s is %q at revision %d in etcd, but the recorder's last write of it is %q at revision %d", c.Key, c.Value, c.Rev, w.Value, w.Rev))
		}
	}
	return out
}
