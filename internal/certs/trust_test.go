package certs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// TestTrustSteps: the rotation's file steps are idempotent (a second call
// changes nothing, as after a kill -9 between two of them), drop only the
// old CA, and never leave a file empty.
func TestTrustSteps(t *testing.T) {
	dir := t.TempDir()
	oldCA := testpki.NewCA(t, "etcd-ca")
	f := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, f, oldCA.CertPEM)
	_ = os.Chmod(f, 0o644)
	old, _ := Parse(oldCA.CertPEM)
	newCert, newKey, err := NewCA(old[0], filepath.Join(dir, "next"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(newKey); fi.Mode().Perm() != 0o600 {
		t.Errorf("new CA key mode %v", fi.Mode().Perm())
	}
	if _, _, err := NewCA(old[0], filepath.Join(dir, "next"), time.Now()); err == nil {
		t.Error("NewCA wrote over an existing CA")
	}
	if _, err := LoadIssuer(newCert, newKey); err != nil {
		t.Fatalf("the new CA does not load: %v", err)
	}
	next, _ := Read(newCert)
	if string(next[0].RawSubject) != string(old[0].RawSubject) || CAID(next[0]) == CAID(old[0]) {
		t.Fatal("the new CA should keep the subject and have a new key")
	}
	for i, want := range []bool{true, false} {
		changed, err := AddTrust(f, next[0])
		if err != nil || changed != want {
			t.Fatalf("AddTrust #%d: changed %v, %v", i+1, changed, err)
		}
	}
	ids, _ := TrustIDs(f)
	if !slices.Equal(ids, []string{CAID(old[0]), CAID(next[0])}) {
		t.Fatalf("after AddTrust: %v", ids)
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want the old 0644", fi.Mode().Perm())
	}
	if _, err := DropTrust(f, []string{CAID(old[0]), CAID(next[0])}); err == nil {
		t.Fatal("DropTrust left a file that trusts nothing")
	}
	if id, err := KeyCAID(filepath.Join(dir, "next", "ca.key")); err != nil || id != CAID(next[0]) {
		t.Fatalf("KeyCAID = %q, %v; want the new CA's %s", id, err, CAID(next[0]))
	}
	for i, want := range []bool{true, false} {
		changed, err := DropTrust(f, []string{CAID(old[0])})
		if err != nil || changed != want {
			t.Fatalf("DropTrust #%d: changed %v, %v", i+1, changed, err)
		}
	}
	if ids, _ := TrustIDs(f); !slices.Equal(ids, []string{CAID(next[0])}) {
		t.Fatalf("after DropTrust: %v", ids)
	}
}
