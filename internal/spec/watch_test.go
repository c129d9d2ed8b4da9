package spec

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatch checks that both an in-place write and an atomic replace
// (write temp, rename) are seen, also after the file was removed once.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- Watch(ctx, path, 50*time.Millisecond, time.Hour, func() { calls <- struct{}{} }) }()
	// The watch is set up once a write is seen: until then, one write
	// every 100 ms (a fixed wait for the set-up may be too short on a
	// loaded machine, and the first write below would go unseen).
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-calls:
		case err := <-started:
			t.Fatalf("watch ended: %v", err)
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the watch never saw a write")
			}
			continue
		}
		break
	}
	drain(calls)

	expectCall := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case err := <-started:
			t.Fatalf("watch ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no change seen after %s", what)
		}
		drain(calls)
	}
	if err := os.WriteFile(path, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectCall("an in-place write")

	tmp := filepath.Join(dir, ".cluster.yaml.tmp")
	if err := os.WriteFile(tmp, []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	expectCall("an atomic replace")

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	expectCall("a remove")
	if err := os.WriteFile(path, []byte("d"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectCall("a re-create after remove")

	// Other files in the directory are not the spec.
	if err := os.WriteFile(filepath.Join(dir, "other.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
		t.Fatalf("a write to another file in the directory was taken for a spec change")
	case <-time.After(time.Second): // 20 debounce periods
	}
}

// drain takes the calls still coming for the step just seen, until none
// came for a second: one write may be several events, and the second
// debounced call may come well after the first on a loaded machine (after
// a fixed 100 ms one could be left for the next step: the last step's "no
// call" check would take it for a call of its own, and the others would
// pass on it without their own change seen).
func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		case <-time.After(time.Second):
			return
		}
	}
}
