package testbed

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Writer puts keys in a loop through the given members until stopped and
// counts writes that did not succeed within retryFor (a write that fails
// once and succeeds on retry within retryFor counts as success).
type Writer struct {
	stop    chan struct{}
	done    chan struct{}
	OK      atomic.Int64
	Failed  atomic.Int64
	LastErr atomic.Value
	Prefix  string
	// MaxStall is the longest a write took from its first try to its
	// success or its last failure (ns): the writer's view of a leader
	// change or of a member going away.
	MaxStall atomic.Int64
}

// StartWriter starts a writer through the named members' endpoints.
func (c *Cluster) StartWriter(prefix string, retryFor time.Duration, names ...string) *Writer {
	cli := c.Client(names...)
	w := &Writer{stop: make(chan struct{}), done: make(chan struct{}), Prefix: prefix}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			key := fmt.Sprintf("%s/%06d", prefix, i)
			began := time.Now()
			deadline := began.Add(retryFor)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := cli.Put(ctx, key, "v")
				cancel()
				if d := time.Since(began).Nanoseconds(); d > w.MaxStall.Load() {
					w.MaxStall.Store(d)
				}
				if err == nil {
					w.OK.Add(1)
					break
				}
				if time.Now().After(deadline) {
					w.Failed.Add(1)
					w.LastErr.Store(err.Error())
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	return w
}

// Stop stops the writer and waits for it.
func (w *Writer) Stop() {
	close(w.stop)
	<-w.done
}
