package main

import (
	"strings"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func recoverSpec(t *testing.T, n int) *spec.Spec {
	t.Helper()
	text := "cluster: {name: c}\nmembers:\n"
	for i := 1; i <= n; i++ {
		ip := "10.0.0." + string(rune('0'+i))
		text += "  - {name: n" + string(rune('0'+i)) + ", peerURLs: [http://" + ip + ":2380], clientURLs: [http://" + ip + ":2379]}\n"
	}
	s, err := spec.Parse([]byte(text), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckUnfenced: a recovery goes on only while the old members it
// cannot fence are fewer than a quorum of the old cluster: an isolated
// host that cannot reach the others must not force a second cluster next
// to theirs.
func TestCheckUnfenced(t *testing.T) {
	reach := func(names ...string) planReport {
		var rep planReport
		for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
			rep.Members = append(rep.Members, recovery.Inspection{Name: n, Reachable: strings.Contains(strings.Join(names, ","), n)})
		}
		return rep
	}
	tests := []struct {
		name    string
		n       int
		rep     planReport
		assumed []string
		fenced  []string
		after   bool
		refused bool
	}{
		{name: "3 members, all reached", n: 3, rep: reach("n1", "n2", "n3")},
		{name: "3 members, one host off", n: 3, rep: reach("n1", "n2")},
		{name: "3 members, the source cut off from both others: refused", n: 3, rep: reach("n1"), refused: true},
		{name: "3 members, both others vouched for", n: 3, rep: reach("n1"), assumed: []string{"n2", "n3"}},
		{name: "3 members, after: one fenced, one off", n: 3, rep: reach("n1", "n2"), fenced: []string{"n2"}, after: true},
		{name: "3 members, after: the fences failed: refused", n: 3, rep: reach("n1", "n2", "n3"), after: true, refused: true},
		{name: "5 members, two hosts off", n: 5, rep: reach("n1", "n2", "n3")},
		{name: "5 members, three hosts off: refused", n: 5, rep: reach("n1", "n2"), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := tt.rep
			rep.Members = rep.Members[:tt.n]
			err := checkUnfenced(recoverSpec(t, tt.n), "n1", rep, tt.assumed, tt.fenced, tt.after)
			if (err != nil) != tt.refused {
				t.Errorf("err = %v, refused %v", err, tt.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("the refusal does not say that nothing changed: %v", err)
			}
		})
	}
}

// TestRecoveryOf: --id names a recovery to go on with; its source must
// be the one asked for, and a source that has it already is not asked to
// start again (nor refused for the quorum it left).
func TestRecoveryOf(t *testing.T) {
	src := &recovery.Journal{Request: recovery.Request{ID: "r1", Role: recovery.RoleSource, Source: "n1"}, Step: recovery.StepForced}
	rep := planReport{Members: []recovery.Inspection{{Name: "n1", Reachable: true, Recovery: src}, {Name: "n2"}}}
	if id, started, err := recoveryOf("r1", "n1", rep); err != nil || id != "r1" || !started {
		t.Errorf("recoveryOf(r1, n1) = %q %v %v, want r1 started", id, started, err)
	}
	if _, _, err := recoveryOf("r1", "n2", rep); err == nil || !strings.Contains(err.Error(), "is from n1") {
		t.Errorf("another source for r1: %v", err)
	}
	if _, _, err := recoveryOf("../x", "n1", rep); err == nil {
		t.Errorf("an id that names a path was taken")
	}
	if id, started, err := recoveryOf("", "n1", rep); err != nil || id == "" || started {
		t.Errorf("a new recovery: %q %v %v", id, started, err)
	}
}
