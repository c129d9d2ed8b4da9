package main

import (
	"encoding/json"
	"math"
	"os"
	"sync"
)

// op is one client operation as the client saw it: what it asked, when it
// asked (Call) and when the answer came (Return), in nanoseconds since the
// run began. An operation whose outcome the client cannot know (a timeout,
// a lost connection) is Unknown: it may or may not have taken effect.
type op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"` // get, put, cas
	Key    string `json:"key"`
	// Value is what put and cas write (unique in the run).
	Value string `json:"value,omitempty"`
	// Expect is cas's compare value.
	Expect string `json:"expect,omitempty"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	// OK: a get or put answered; a cas succeeded. Unknown: no answer.
	OK      bool `json:"ok"`
	Unknown bool `json:"unknown,omitempty"`
	// Refused: the write got "mvcc: database space exceeded" (NOSPACE).
	// Not a definite failure in etcd 3.7: refused before raft (the
	// member's quota check) or at apply while the alarm is raised, it
	// never took effect; but the put or txn that crosses the quota at
	// apply is applied and answered NOSPACE all the same (quotaApplierV3).
	// Resolved like an unknown write, but one that happened did so before
	// its answer came: it keeps its return time.
	Refused bool `json:"refused,omitempty"`
	// Got is the value a get read, or the value a failed cas found.
	Got string `json:"got,omitempty"`
	// Rev is the revision a successful put or cas wrote at.
	Rev int64  `json:"rev,omitempty"`
	Err string `json:"err,omitempty"`
	// Resolved, for an unknown or refused write, says what etcd's history
	// (the recorder's) shows: "happened" or "never".
	Resolved string `json:"resolved,omitempty"`
}

// history collects the operations of all clients.
type history struct {
	mu  sync.Mutex
	ops []op
	max int
}

// add records o; it reports false once the history is full.
func (h *history) add(o op) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, o)
	return len(h.ops) < h.max
}

func (h *history) full() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops) >= h.max
}

func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...)
}

// write saves the history as JSON lines.
func writeHistory(path string, ops []op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// infinity is the return time of an operation whose outcome is unknown:
// the checker may place it anywhere after its call.
const infinity = math.MaxInt64
