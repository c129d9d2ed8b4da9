package integration

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// plaintextWatch reads every file under its roots again and again (every
// few ms, in a goroutine of its own, until stop) and keeps each file it
// ever saw holding the secret: a decrypted copy lasting a moment is seen
// too. etcd's data dirs (a member/ dir: the live one, one moved aside, a
// restore's output renamed into place) hold the keyspace by nature and
// are not read; nothing else on a disk may.
type plaintextWatch struct {
	secret []byte
	roots  []string

	mu   sync.Mutex
	seen map[string]bool // every file read -> held the secret

	quit chan struct{}
	done chan struct{}
}

func watchPlaintext(secret []byte, roots ...string) *plaintextWatch {
	w := &plaintextWatch{secret: secret, roots: roots, seen: map[string]bool{}, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.scan()
			select {
			case <-w.quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *plaintextWatch) scan() {
	for _, root := range w.roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if d.Name() == "member" {
					return filepath.SkipDir
				}
				return nil
			}
			hit := fileHolds(p, w.secret)
			w.mu.Lock()
			w.seen[p] = w.seen[p] || hit
			w.mu.Unlock()
			return nil
		})
	}
}

// stop ends the watch after one last scan.
func (w *plaintextWatch) stop() {
	close(w.quit)
	<-w.done
	w.scan()
}

// hits are the files that held the secret, and how many files were read.
func (w *plaintextWatch) hits() (hits []string, seen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, hit := range w.seen {
		if hit {
			hits = append(hits, p)
		}
	}
	slices.Sort(hits)
	return hits, len(w.seen)
}

// fileHolds: the file at p holds secret (false when it is gone).
func fileHolds(p string, secret []byte) bool {
	b, err := os.ReadFile(p)
	return err == nil && bytes.Contains(b, secret)
}

// filesHolding are the regular files under root, etcd's data dirs
// included, that hold secret.
func filesHolding(root string, secret []byte) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && fileHolds(p, secret) {
			out = append(out, p)
		}
		return nil
	})
	return out
}
