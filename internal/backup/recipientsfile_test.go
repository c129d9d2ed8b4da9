package backup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
)

// TestRecipientsFile runs the schedule against a real etcd with its
// recipients in backup.encryption.recipientsFile: a key added to the file
// is used from the next snapshot on, without the spec changing; and when
// another local user (uid 65534, as that user) could write the file, or
// the file is gone, no snapshot is taken at all: never one in plaintext,
// never one their key could read.
func TestRecipientsFile(t *testing.T) {
	ep, peer := testetcd.Start(t)
	fill(t, ep, 50, 100)
	first, added, theirs := newKey(t), newKey(t), newKey(t)
	root := t.TempDir()
	// uid 65534 must reach the file, as it could on a real host.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rfile := filepath.Join(root, "backup.recipients")
	if err := os.WriteFile(rfile, []byte("# the demo's key\n"+first.name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, err := spec.Parse(fmt.Appendf(nil, `cluster: {name: c1}
members:
  - {name: a, peerURLs: [%s], clientURLs: [%s]}
agent:
  stateDir: state/{name}
backup:
  interval: 1s
  keep: 50
  drillInterval: 0s
  encryption:
    recipientsFile: backup.recipients
    identityFile: %s
`, peer, ep, first.file), filepath.Join(root, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Backup.Encryption.Encrypts() || sp.Backup.Encryption.RecipientsFile != rfile {
		t.Fatalf("encryption: %+v", sp.Backup.Encryption)
	}
	self := sp.Members[0]
	s := NewScheduler(Config{Spec: func() (*spec.Spec, spec.Member) { return sp, self }, Metrics: metrics.New().Backup})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// snapshots are this dir's snapshots, oldest first.
	snapshots := func() []Entry {
		es, err := List(self.SnapshotDir, "c1")
		if err != nil {
			return nil
		}
		slices.Reverse(es)
		return es
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 2m; state %+v", what, s.State())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	recipientsOf := func(e Entry) []string {
		if e.Sidecar == nil || e.Sidecar.Encryption == nil {
			return nil // plaintext
		}
		return e.Sidecar.Encryption.Recipients
	}
	waitFor("a snapshot to the file's key", func() bool {
		es := snapshots()
		return len(es) > 0 && slices.Equal(recipientsOf(es[len(es)-1]), []string{first.name})
	})

	// Rotation: a line added to the file counts from the next snapshot.
	f, err := os.OpenFile(rfile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%s\n", added.name)
	f.Close()
	waitFor("a snapshot to both keys", func() bool {
		es := snapshots()
		return slices.Equal(recipientsOf(es[len(es)-1]), []string{first.name, added.name})
	})

	refused := func(why, want string) {
		t.Helper()
		// The schedule has seen the change once a pass has failed on it.
		waitFor(why+": refused", func() bool { return strings.Contains(s.State().LastError, want) })
		before := snapshots()
		time.Sleep(3 * time.Second) // three more intervals
		after := snapshots()
		if len(after) != len(before) {
			t.Errorf("%s: %d snapshots taken while refused", why, len(after)-len(before))
		}
		for _, e := range after {
			if r := recipientsOf(e); len(r) == 0 || slices.Contains(r, theirs.name) {
				t.Errorf("%s: %s is encrypted to %v", why, e.File, r)
			}
		}
		if st := s.State(); st.FailuresInARow == 0 || !strings.Contains(st.Encryption, "REFUSED") {
			t.Errorf("%s: state says %q (failures %d)", why, st.Encryption, st.FailuresInARow)
		}
		t.Logf("%s: %s", why, s.State().LastError)
	}

	// Another local user who can write the file adds their key.
	if err := os.Chmod(rfile, 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err == nil {
			cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", `echo "$KEY" >> "$FILE"`)
			cmd.Env = append(os.Environ(), "KEY="+theirs.name, "FILE="+rfile)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("adding a key as uid 65534: %v: %s", err, out)
			}
		}
	}
	refused("a file others can write", "writable by group or others")

	// Put right, and then gone.
	if err := os.WriteFile(rfile+".new", []byte(first.name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rfile+".new", rfile); err != nil {
		t.Fatal(err)
	}
	n := len(snapshots())
	waitFor("snapshots again once the file is put right", func() bool { return len(snapshots()) > n })
	if err := os.Remove(rfile); err != nil {
		t.Fatal(err)
	}
	refused("no file", "no such file")
}
