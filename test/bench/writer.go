package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
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
	// peer is the address the put went to ("" when it never left the
	// client), for a client dialed with peerRecorder.
	peer string
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
		slot := &peerSlot{}
		_, err := w.cli.Put(context.WithValue(ctx, peerSlotKey{}, slot), fmt.Sprintf("%s/%08d", prefix, i), "v")
		cancel()
		w.mu.Lock()
		w.recs = append(w.recs, write{at: at, dur: time.Since(at), err: err, peer: slot.get()})
		w.mu.Unlock()
	}
}

// peerSlot is where peerRecorder leaves the address a call went to.
type peerSlot struct {
	mu   sync.Mutex
	addr string
}

type peerSlotKey struct{}

func (s *peerSlot) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// peerRecorder is a client interceptor (grpc.WithChainUnaryInterceptor)
// that records, for a call whose context carries a peerSlot, the address
// of the member its last attempt went to: so that a failed put can be
// told apart by where it went.
func peerRecorder(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if s, ok := ctx.Value(peerSlotKey{}).(*peerSlot); ok && p.Addr != nil {
		s.mu.Lock()
		s.addr = p.Addr.String()
		s.mu.Unlock()
	}
	return err
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
