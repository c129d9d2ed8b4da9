package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Big data: once per run, the nemesis loads -big-mb megabytes of keys
// (100 KB values under /bigdata/, which the clients' model never reads:
// the linearizability and lost-write checks look at /chaos/ only) through
// the cluster, and as soon as they are in, corrupts a member's WAL: that
// member is repaired with a database of 100 MB and more, which the leader
// sends it as a snapshot or a long log while the cluster lock's lease and
// the agents' learner and start timeouts run. The data stays for the rest
// of the run (the history check reads etcd's history from revision 1, so
// nothing may compact it): every later repair and join (a spec edit adding
// a member) carries it too, and slow links and hosts go preferably to
// such members. The summary reports how long the load, each repair and
// each join with it took.
const (
	bigPrefix    = "/bigdata/"
	bigValueSize = 100 << 10
)

type bigData struct {
	mb      int
	fault   int // the big-data fault, -1 before it
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	loaded  atomic.Int64 // keys in
	done    atomic.Bool
	err     atomic.Value // string: why the load stopped short
	doneAt  time.Time    // when tend saw the load finished
	dbSize  int64        // the largest member db right after the load
	repair  int          // the repair started on the loaded cluster, -1 before it
	nextTry time.Time
	joins   []string // joins finished with the data in: name and time
}

func newBigData(mb int) *bigData {
	return &bigData{mb: mb, fault: -1, repair: -1}
}

// bigLoad starts loading the big data (the big-data fault: it acts until
// the load is done).
func (n *nemesis) bigLoad() string {
	b := n.big
	if b == nil || b.mb <= 0 {
		return "big data disabled (-big-mb 0)"
	}
	if b.fault >= 0 {
		return "the big data is loaded once per run"
	}
	if _, why := n.candidates(); why != "" {
		return why
	}
	keys := b.mb << 20 / bigValueSize
	cli := n.c.Client(n.spec...)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.fault = n.record(fault{Kind: "big-data", Target: strings.Join(n.spec, ","), At: time.Now(),
		Detail: fmt.Sprintf("%d MB: %d keys of %d KB under %s, then a repair with it", b.mb, keys, bigValueSize>>10, bigPrefix)})
	next := atomic.Int64{}
	for w := 0; w < 4; w++ {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			val := make([]byte, bigValueSize)
			for {
				i := int(next.Add(1)) - 1
				if i >= keys {
					return
				}
				for j := range val {
					val[j] = byte('a' + (i+j*7)%26)
				}
				key := fmt.Sprintf("%sk%05d", bigPrefix, i)
				// A put may fail while faults act: retried until the
				// run heals.
				for {
					pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := cli.Put(pctx, key, string(val))
					pcancel()
					if err == nil {
						b.loaded.Add(1)
						break
					}
					if ctx.Err() != nil {
						b.err.Store(fmt.Sprintf("stopped at %d of %d keys: %v", b.loaded.Load(), keys, err))
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
		}()
	}
	go func() {
		b.wg.Wait()
		_ = cli.Close()
		b.done.Store(true)
	}()
	return ""
}

// tendBig, on every pass of the nemesis: ends the big-data fault when the
// load is done, then starts a repair (a corrupt WAL) on the loaded
// cluster, and notes the joins that carried the data.
func (n *nemesis) tendBig() {
	b := n.big
	if b == nil || b.fault < 0 {
		return
	}
	if b.done.Load() && b.doneAt.IsZero() {
		b.doneAt = time.Now()
		f := &n.Faults[b.fault]
		f.Detail += fmt.Sprintf("; loaded %d keys in %s", b.loaded.Load(), b.doneAt.Sub(f.At).Round(100*time.Millisecond))
		if e, ok := b.err.Load().(string); ok {
			f.Detail += "; " + e
		}
		b.dbSize = n.dbSize()
		f.Detail += fmt.Sprintf("; largest db %d MB", b.dbSize>>20)
		n.ended(b.fault)
	}
	if b.doneAt.IsZero() {
		return
	}
	if b.repair < 0 && time.Now().After(b.nextTry) && !n.nospace.acting() {
		if why := n.corruptWAL(); why != "" {
			b.nextTry = time.Now().Add(2 * time.Second)
		} else {
			b.repair = len(n.Faults) - 1
			n.Faults[b.repair].Detail += fmt.Sprintf(", with the big data (db %d MB)", b.dbSize>>20)
			n.Counts["big-repair"]++
		}
	}
}

// bigJoined notes a join (a spec edit that added name at since) that
// finished as a healthy voter, if the big data was in before it began.
func (n *nemesis) bigJoined(name string, since time.Time) {
	if b := n.big; b != nil && !b.doneAt.IsZero() && since.After(b.doneAt) {
		b.joins = append(b.joins, fmt.Sprintf("%s %s", name, time.Since(since).Round(100*time.Millisecond)))
	}
}

// stopBig stops a load still running (at the heal).
func (n *nemesis) stopBig() {
	if b := n.big; b != nil && b.cancel != nil {
		b.cancel()
		b.wg.Wait()
		n.tendBig()
	}
}

// dbSize is the largest db of the spec's members.
func (n *nemesis) dbSize() int64 {
	var max int64
	for _, name := range n.spec {
		cli := n.c.Client(name)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, n.c.Member(name).ClientURL())
		cancel()
		_ = cli.Close()
		if err == nil && st.DbSize > max {
			max = st.DbSize
		}
	}
	return max
}

// bigSummary: how long the load, the repairs and the joins with the big
// data took ("" when there was none).
func (n *nemesis) bigSummary() string {
	b := n.big
	if b == nil || b.fault < 0 {
		return ""
	}
	f := n.Faults[b.fault]
	var repairs []string
	for _, r := range n.Faults {
		if r.Kind != "corrupt-wal" || b.doneAt.IsZero() || r.At.Before(b.doneAt) {
			continue
		}
		took := "recovered after the heal"
		if !r.Recovered.IsZero() {
			took = r.Recovered.Sub(r.At).Round(100 * time.Millisecond).String()
		}
		repairs = append(repairs, fmt.Sprintf("%s %s", r.Target, took))
	}
	if len(repairs) == 0 {
		repairs = []string{"none"}
	}
	joins := b.joins
	if len(joins) == 0 {
		joins = []string{"none"}
	}
	load := "not finished"
	if !b.doneAt.IsZero() {
		load = b.doneAt.Sub(f.At).Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("big data: %d MB (%d keys of %d KB) loaded in %s, largest db %d MB; repairs with it (WAL corrupted → healthy voter): %s; joins with it (spec edit → healthy voter): %s",
		b.mb, b.loaded.Load(), bigValueSize>>10, load, b.dbSize>>20, strings.Join(repairs, ", "), strings.Join(joins, ", "))
}
