package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer is the steady client of the table: one put every writeEvery, each
// a single attempt with writeTimeout, never retried, so that a put that
// does not succeed counts as failed.
type writer struct {
	cli  *clientv3.Client
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	recs []write
}

type write struct {
	at  time.Time
	dur time.Duration
	err error
}

const (
	writeEvery   = 20 * time.Millisecond
	writeTimeout = 2 * time.Second
)

func startWriter(cli *clientv3.Client, prefix string) *writer {
	w := &writer{cli: cli, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(prefix)
	return w
}

func (w *writer) run(prefix string) {
	defer close(w.done)
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		_, err := w.cli.Put(ctx, fmt.Sprintf("%s/%08d", prefix, i), "v")
		cancel()
		w.mu.Lock()
		w.recs = append(w.recs, write{at: at, dur: time.Since(at), err: err})
		w.mu.Unlock()
	}
}

func (w *writer) Stop() {
	close(w.stop)
	<-w.done
}

// writes is what the writer saw during one event.
type writes struct {
	OK, Failed int
	P99        time.Duration
	LastErr    string
}

// window summarizes the writes begun in [from, to].
func (w *writer) window(from, to time.Time) writes {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out writes
	var lat []time.Duration
	for _, r := range w.recs {
		if r.at.Before(from) || r.at.After(to) {
			continue
		}
		lat = append(lat, r.dur)
		if r.err != nil {
			out.Failed++
			out.LastErr = r.err.Error()
		} else {
			out.OK++
		}
	}
	out.P99 = percentile(lat, 0.99)
	return out
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
