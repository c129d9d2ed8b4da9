package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
)

// FileName is the mirror's file in the agent's state dir.
const FileName = "history.jsonl"

// MaxPush bounds how many events one push carries to the cluster (etcd
// takes at most 128 operations in a transaction by default).
const MaxPush = 100

// line is one line of the mirror: an event, and whether the cluster has
// it.
type line struct {
	Event
	Pushed bool `json:"pushed,omitempty"`
}

// Mirror is an agent's copy of its own events, one JSON line each, the
// last Keep of them; the events the cluster does not have yet are pushed
// from it. Safe for concurrent use.
type Mirror struct {
	path string
	keep int
	mu   sync.Mutex
}

// NewMirror is the mirror at path, keeping the last keep events.
func NewMirror(path string, keep int) *Mirror { return &Mirror{path: path, keep: keep} }

// RepeatWindow is how long the same event again (a step that fails on
// every pass with the same error) is not recorded again: the history
// keeps what changed, not each retry.
const RepeatWindow = 10 * time.Minute

// Append adds ev, not yet pushed, dropping the oldest beyond the bound;
// the same event as the last one, within RepeatWindow, is not added. The
// file is replaced whole (atomicfile): a crash leaves the old or the new
// list, never half a line.
func (m *Mirror) Append(ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls, err := m.load()
	if err != nil {
		return err
	}
	if n := len(ls); n > 0 && repeats(ls[n-1].Event, ev) {
		return nil
	}
	return m.save(last(append(ls, line{Event: ev}), m.keep))
}

// repeats: b is a says again, within RepeatWindow.
func repeats(a, b Event) bool {
	return a.Host == b.Host && a.Kind == b.Kind && a.Member == b.Member && a.MemberID == b.MemberID &&
		a.Reason == b.Reason && maps.Equal(a.Detail, b.Detail) && b.Time.Sub(a.Time) < RepeatWindow
}

// Pending are the oldest events the cluster does not have yet, at most
// MaxPush of them.
func (m *Mirror) Pending() ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls, err := m.load()
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, l := range ls {
		if !l.Pushed && len(out) < MaxPush {
			out = append(out, l.Event)
		}
	}
	return out, nil
}

// MarkPushed records that the cluster has the events evs.
func (m *Mirror) MarkPushed(evs []Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls, err := m.load()
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, e := range evs {
		done[e.ID()] = true
	}
	for i := range ls {
		if done[ls[i].ID()] {
			ls[i].Pushed = true
		}
	}
	return m.save(ls)
}

// Events are the mirror's events, oldest first.
func (m *Mirror) Events() ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return ReadFile(m.path)
}

func (m *Mirror) load() ([]line, error) {
	f, err := os.Open(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history mirror: %w", err)
	}
	defer f.Close()
	return parse(f)
}

func (m *Mirror) save(ls []line) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, l := range ls {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("encode history event: %w", err)
		}
	}
	if err := atomicfile.WriteFile(m.path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write history mirror: %w", err)
	}
	return nil
}

// parse reads the mirror's lines; a line that does not parse (a file
// edited by hand) is skipped, not fatal: the rest is still history.
func parse(r io.Reader) ([]line, error) {
	var ls []line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Kind != "" {
			ls = append(ls, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history mirror: %w", err)
	}
	return ls, nil
}

// ReadFile reads the events of the mirror at path (none when it does not
// exist), oldest first.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history mirror: %w", err)
	}
	defer f.Close()
	ls, err := parse(f)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(ls))
	for i, l := range ls {
		out[i] = l.Event
	}
	return out, nil
}
