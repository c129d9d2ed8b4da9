package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// workload is the clients: each does gets, puts and compare-and-swaps on
// a few keys, with values unique in the run, at a steady rate, and
// records every operation with its invocation and completion time.
type workload struct {
	endpoints []string
	keys      []string
	rate      float64 // operations per second per client
	timeout   time.Duration
	start     time.Time
	hist      *history
	// keepalive: find connections to a member cut off the network (it
	// neither answers nor resets them) within 2 s.
	keepalive bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func (w *workload) now() int64 { return time.Since(w.start).Nanoseconds() }

func (w *workload) client() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: w.endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if w.keepalive {
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = time.Second, time.Second
	}
	return clientv3.New(cfg)
}

// initKeys gives every key a first value, recorded like any put.
func (w *workload) initKeys() error {
	cli, err := w.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, k := range w.keys {
		o := w.put(cli, 0, k, "init-"+k)
		if !o.OK {
			return fmt.Errorf("initial put of %s: %s", k, o.Err)
		}
	}
	return nil
}

func (w *workload) run(clients int, seed uint64) error {
	w.stop = make(chan struct{})
	for i := 1; i <= clients; i++ {
		cli, err := w.client()
		if err != nil {
			return err
		}
		w.wg.Add(1)
		go func(id int) {
			defer w.wg.Done()
			defer cli.Close()
			w.loop(cli, id, rand.New(rand.NewPCG(seed, uint64(id))))
		}(i)
	}
	return nil
}

func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) loop(cli *clientv3.Client, id int, rnd *rand.Rand) {
	last := map[string]string{}
	every := time.Duration(float64(time.Second) / w.rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		if w.hist.full() {
			continue
		}
		k := w.keys[rnd.IntN(len(w.keys))]
		v := fmt.Sprintf("c%d-%d", id, seq)
		var o op
		switch p := rnd.IntN(10); {
		case p < 4:
			o = w.get(cli, id, k)
		case p < 7:
			o = w.put(cli, id, k, v)
		default:
			expect := last[k]
			if expect == "" {
				expect = "init-" + k
			}
			o = w.cas(cli, id, k, expect, v)
		}
		switch {
		case o.Unknown || o.Refused:
			delete(last, k)
		case o.Kind == "get" || (o.Kind == "cas" && !o.OK):
			last[k] = o.Got
		default:
			last[k] = o.Value
		}
	}
}

func (w *workload) record(o op) op {
	w.hist.add(o)
	return o
}

func (w *workload) get(cli *clientv3.Client, id int, k string) op {
	o := op{Client: id, Kind: "get", Key: k, Call: w.now()}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	resp, err := cli.Get(ctx, k)
	cancel()
	o.Return = w.now()
	if err != nil {
		o.Unknown, o.Err = true, err.Error()
		return w.record(o)
	}
	o.OK = true
	if len(resp.Kvs) > 0 {
		o.Got = string(resp.Kvs[0].Value)
	}
	return w.record(o)
}

func (w *workload) put(cli *clientv3.Client, id int, k, v string) op {
	o := op{Client: id, Kind: "put", Key: k, Value: v, Call: w.now()}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	resp, err := cli.Put(ctx, k, v)
	cancel()
	o.Return = w.now()
	if err != nil {
		return w.record(failed(o, err))
	}
	o.OK, o.Rev = true, resp.Header.Revision
	return w.record(o)
}

// cas is etcd's compare-and-swap: a Txn that puts v if the key's value is
// expect, and otherwise reads the value it found.
func (w *workload) cas(cli *clientv3.Client, id int, k, expect, v string) op {
	o := op{Client: id, Kind: "cas", Key: k, Value: v, Expect: expect, Call: w.now()}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k), "=", expect)).
		Then(clientv3.OpPut(k, v)).
		Else(clientv3.OpGet(k)).
		Commit()
	cancel()
	o.Return = w.now()
	if err != nil {
		return w.record(failed(o, err))
	}
	if resp.Succeeded {
		o.OK, o.Rev = true, resp.Header.Revision
		return w.record(o)
	}
	if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		o.Got = string(rr.Kvs[0].Value)
	}
	return w.record(o)
}

// failed records a write's error: NOSPACE ("mvcc: database space
// exceeded") is a definite refusal, anything else leaves the outcome
// unknown.
func failed(o op, err error) op {
	o.Err = err.Error()
	if errors.Is(err, rpctypes.ErrNoSpace) {
		o.Refused = true
	} else {
		o.Unknown = true
	}
	return o
}
