package repair

import (
	"path/filepath"
	"testing"
)

// TestDBMembers reads the membership a real etcd left in its db, offline:
// what a stopped member's agent reports to recover as the voters its data
// knows (issue 20 / F1).
func TestDBMembers(t *testing.T) {
	f := realFixture(t)
	dir := filepath.Join(t.TempDir(), "a")
	copyDir(t, f.a, dir)
	ms, err := DBMembers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ID != f.memberA || ms[0].Name != "m1" || ms[0].Learner {
		t.Errorf("DBMembers = %+v, want member %x named m1, a voter", ms, f.memberA)
	}
	if ms, err := DBMembers(filepath.Join(t.TempDir(), "none")); err != nil || ms != nil {
		t.Errorf("no data dir: %v %v, want nothing", ms, err)
	}
}
