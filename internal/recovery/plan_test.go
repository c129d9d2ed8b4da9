package recovery

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// healthy is a reachable member whose data dir verifies, at index and
// revision.
func healthy(name string, index uint64, rev int64) Inspection {
	return Inspection{Name: name, Reachable: true, Data: "healthy", Index: index, Revision: rev, Term: 3}
}

func unreachable(name string) Inspection {
	return Inspection{Name: name, Error: "dial tcp 127.0.0.9:2377: connect: connection refused"}
}

func withData(i Inspection, data, reason string) Inspection {
	i.Data, i.Reason = data, reason
	return i
}

func withSnapshot(i Inspection, path string, rev int64, age time.Duration) Inspection {
	i.Snapshot = &Snapshot{Path: path, TakenAt: now.Add(-age), Revision: rev, Keys: 10, Size: 1 << 20}
	return i
}

// TestRecommend: the usable data that goes furthest is the source, and
// what the others hold beyond it is named as lost. Each row names the
// source, parts of Why, and the loss lines exactly.
func TestRecommend(t *testing.T) {
	tests := []struct {
		name   string
		ins    []Inspection
		source string
		why    []string
		loss   []string
		// snapHost is the host of the snapshot the recommendation names
		// ("" for none).
		snapHost string
	}{
		{name: "the highest committed index wins, a higher revision behind it is named as lost",
			ins:    []Inspection{healthy("node1", 100, 30), healthy("node2", 120, 40), healthy("node3", 110, 60)},
			source: "node2", why: []string{"node2's data goes furthest among the usable: committed index 120, revision 40"},
			loss: []string{"node3 (healthy) reached index 110, revision 60: 0 entries, 20 revisions more than node2, lost"}},
		{name: "the same index: the higher revision wins",
			ins:    []Inspection{healthy("node1", 100, 50), healthy("node2", 100, 60), healthy("node3", 90, 55)},
			source: "node2", why: []string{"committed index 100, revision 60"}},
		{name: "the same index and revision: the spec's order wins",
			ins:    []Inspection{healthy("node1", 90, 50), healthy("node2", 100, 60), healthy("node3", 100, 60), healthy("node4", 100, 60)},
			source: "node2", why: []string{"node2's data goes furthest among the usable: committed index 100, revision 60"}},
		{name: "a running member's data (serving) is usable",
			ins:    []Inspection{healthy("node1", 100, 50), withData(healthy("node2", 130, 70), "serving", "")},
			source: "node2", why: []string{"committed index 130, revision 70"}},
		{name: "a corrupt member that reached further is never the source; what it held is lost",
			ins:    []Inspection{withData(healthy("node1", 200, 90), "corrupt", "walpb: crc mismatch"), healthy("node2", 150, 80), healthy("node3", 140, 75)},
			source: "node2", why: []string{"node2's data goes furthest among the usable: committed index 150, revision 80"},
			loss: []string{"node1 (corrupt) reached index 200, revision 90: 50 entries, 10 revisions more than node2, lost"}},
		{name: "empty, locked and unreadable data dirs are never the source",
			ins: []Inspection{withData(healthy("node1", 300, 900), "empty", ""), withData(healthy("node2", 300, 900), "locked", "flock"),
				withData(healthy("node3", 300, 900), "unreadable", "permission denied"), healthy("node4", 10, 5)},
			source: "node4", why: []string{"node4's data goes furthest among the usable: committed index 10, revision 5"},
			loss: []string{
				"node1 (empty) reached index 300, revision 900: 290 entries, 895 revisions more than node4, lost",
				"node2 (locked) reached index 300, revision 900: 290 entries, 895 revisions more than node4, lost",
				"node3 (unreadable) reached index 300, revision 900: 290 entries, 895 revisions more than node4, lost"}},
		// An agent that does not answer may hold anything: it is never
		// the source, and its loss is unknown.
		{name: "an unreachable member is never the source; its loss is unknown",
			ins:    []Inspection{{Name: "node1", Data: "healthy", Index: 999, Revision: 999}, healthy("node2", 100, 50), unreachable("node3")},
			source: "node2", why: []string{"node2's data goes furthest among the usable: committed index 100, revision 50"},
			loss: []string{"node1: its agent did not answer; what its data holds is unknown",
				"node3: its agent did not answer; what its data holds is unknown"}},
		{name: "a member behind the source in both loses nothing",
			ins:    []Inspection{healthy("node1", 100, 50), healthy("node2", 99, 50), withData(healthy("node3", 80, 40), "corrupt", "torn")},
			source: "node1", why: []string{"node1's data goes furthest among the usable: committed index 100, revision 50"}},
		{name: "the newest snapshot behind the source is named for comparison",
			ins: []Inspection{withSnapshot(healthy("node1", 100, 50), "/snap/a.db", 10, time.Hour),
				withSnapshot(healthy("node2", 90, 45), "/snap/b.db", 20, 2*time.Hour)},
			source: "node1", snapHost: "node2", why: []string{"node1's data goes furthest"},
			loss: []string{"for comparison, the newest snapshot (node2, 2h0m0s ago) is 30 revisions behind node1"}},
		{name: "a snapshot at the source's revision: no comparison line",
			ins:    []Inspection{withSnapshot(healthy("node1", 100, 50), "/snap/a.db", 50, time.Hour)},
			source: "node1", snapHost: "node1", why: []string{"node1's data goes furthest"}},
		{name: "no usable data: the newest verified snapshot, with its host",
			ins: []Inspection{withSnapshot(withData(healthy("node1", 200, 90), "corrupt", "crc"), "/snap/old.db", 100, time.Hour),
				withSnapshot(withData(Inspection{Name: "node2", Reachable: true}, "empty", ""), "/var/lib/etcd-snap/new.db", 200, 90*time.Minute),
				unreachable("node3")},
			snapHost: "node2",
			why:      []string{"no member's data is usable: recover from the newest verified snapshot, /var/lib/etcd-snap/new.db on node2 (revision 200, taken 1h30m0s ago), with --from-snapshot on that host"}},
		// Index 0: the committed index could not be read; such data is
		// not known to hold anything.
		{name: "healthy data with committed index 0 is not usable",
			ins:      []Inspection{withSnapshot(healthy("node1", 0, 500), "/snap/a.db", 400, time.Minute)},
			snapHost: "node1", why: []string{"no member's data is usable: recover from the newest verified snapshot, /snap/a.db on node1"}},
		{name: "no usable data and no snapshot: says so",
			ins:  []Inspection{withData(healthy("node1", 200, 90), "corrupt", "crc"), unreachable("node2"), withData(Inspection{Name: "node3", Reachable: true}, "empty", "")},
			why:  []string{"no member's data is usable and no verified snapshot was found"},
			loss: nil},
		{name: "nothing inspected",
			why: []string{"no member's data is usable and no verified snapshot was found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.why) == 0 {
				t.Fatal("row without a part of Why: name the part only the intended rule gives")
			}
			r := Recommend(tt.ins, now)
			if r.Source != tt.source {
				t.Errorf("source = %q (%s), want %q", r.Source, r.Why, tt.source)
			}
			if r.Source != "" {
				i := tt.ins[slices.IndexFunc(tt.ins, func(i Inspection) bool { return i.Name == r.Source })]
				if !i.Usable() {
					t.Errorf("source %s is not usable: %+v", r.Source, i)
				}
			}
			for _, part := range tt.why {
				if !strings.Contains(r.Why, part) {
					t.Errorf("why = %q, want it to contain %q", r.Why, part)
				}
			}
			if !slices.Equal(r.Loss, tt.loss) {
				t.Errorf("loss =\n  %s\nwant\n  %s", strings.Join(r.Loss, "\n  "), strings.Join(tt.loss, "\n  "))
			}
			if r.SnapshotHost != tt.snapHost || (r.Snapshot == nil) != (tt.snapHost == "") {
				t.Errorf("snapshot %+v on %q, want one on %q", r.Snapshot, r.SnapshotHost, tt.snapHost)
			}
		})
	}
}

// TestCheckFrom: a recovery from a member is refused while a quorum of
// voters is healthy, while any host takes part in another recovery, and
// from data that is not known to be usable.
func TestCheckFrom(t *testing.T) {
	lost := q(false, "1 of 3 voters healthy")
	base := func(mods ...func([]Inspection)) []Inspection {
		ins := []Inspection{healthy("node1", 100, 50), unreachable("node2"),
			withData(healthy("node3", 120, 60), "corrupt", "walpb: crc mismatch"),
			withData(Inspection{Name: "node4", Reachable: true}, "empty", ""),
			withData(healthy("node5", 0, 0), "healthy", ""),
			withData(healthy("node6", 90, 40), "serving", "")}
		for _, m := range mods {
			m(ins)
		}
		return ins
	}
	journal := func(i int, step Step) func([]Inspection) {
		return func(ins []Inspection) {
			ins[i].Recovery = &Journal{Request: Request{ID: "r0", Role: RoleFenced, Source: "node9"}, Step: step}
		}
	}
	tests := []struct {
		name   string
		ins    []Inspection
		source string
		q      QuorumState
		err    string // "" when accepted
	}{
		{name: "accepted: healthy data, quorum lost", ins: base(), source: "node1", q: lost},
		{name: "accepted: a running member's data (serving)", ins: base(), source: "node6", q: lost},
		{name: "accepted: another host's recovery is over (done, refused)", ins: base(journal(1, StepDone), journal(3, StepRefused)), source: "node1", q: lost},
		{name: "refused: a quorum of voters is healthy", ins: base(), source: "node1", q: q(true, "2 of 3 voters healthy"),
			err: "a quorum of voters is healthy (2 of 3 voters healthy): the cluster needs no recovery; nothing was changed"},
		{name: "refused: an agent reports a healthy voter", ins: base(func(ins []Inspection) { ins[5].HealthyVoter = true }), source: "node1", q: lost,
			err: "node6 is a healthy voter: its cluster has a quorum; nothing was changed"},
		{name: "refused: a recovery is open on some host", ins: base(journal(3, StepFenced)), source: "node1", q: lost,
			err: "node4 takes part in recovery r0 (fenced, step fenced): let it finish; nothing was changed"},
		{name: "refused: a recovery is open on the source itself", ins: base(journal(0, StepRequested)), source: "node1", q: lost,
			err: "node1 takes part in recovery r0"},
		{name: "refused: the source is not in the spec", ins: base(), source: "node9", q: lost,
			err: "node9 is not a member of the spec (members: node1, node2, node3, node4, node5, node6)"},
		{name: "refused: the source's agent does not answer", ins: base(), source: "node2", q: lost,
			err: "node2's agent does not answer (dial tcp 127.0.0.9:2377: connect: connection refused): run recover on node2 itself, or make its agent reachable (agent.recoveryAddr); nothing was changed"},
		{name: "refused: the source's data is corrupt", ins: base(), source: "node3", q: lost,
			err: "node3's data cannot be a recovery's source (corrupt: walpb: crc mismatch); choose another member, or --from-snapshot; nothing was changed"},
		{name: "refused: the source's data dir is empty", ins: base(), source: "node4", q: lost,
			err: "node4's data cannot be a recovery's source (empty)"},
		{name: "refused: the source's committed index is unknown", ins: base(), source: "node5", q: lost,
			err: "node5's data cannot be a recovery's source (healthy)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, CheckFrom(tt.ins, tt.source, tt.q, ""), tt.err)
		})
	}
}

// TestCheckFromSnapshot: a recovery from a snapshot needs no usable data,
// but is refused like one from a member while a quorum is healthy or a
// recovery is open anywhere.
func TestCheckFromSnapshot(t *testing.T) {
	allBad := []Inspection{withData(healthy("node1", 100, 50), "corrupt", "crc"), unreachable("node2"), withData(Inspection{Name: "node3", Reachable: true}, "empty", "")}
	open := slices.Clone(allBad)
	open[2].Recovery = &Journal{Request: Request{ID: "r0", Role: RoleSource, Source: "node3", Snapshot: "/s.db"}, Step: StepMoved}
	voter := slices.Clone(allBad)
	voter[0].HealthyVoter = true
	tests := []struct {
		name string
		ins  []Inspection
		q    QuorumState
		err  string
	}{
		{name: "accepted: no usable data at all", ins: allBad, q: q(false, "no endpoint answered")},
		{name: "refused: a quorum of voters is healthy", ins: allBad, q: q(true, "3 of 3 voters healthy"), err: "a quorum of voters is healthy (3 of 3 voters healthy): the cluster needs no recovery; nothing was changed"},
		{name: "refused: an agent reports a healthy voter", ins: voter, q: q(false, ""), err: "node1 is a healthy voter"},
		{name: "refused: a recovery is open on some host", ins: open, q: q(false, ""), err: "node3 takes part in recovery r0 (source, step moved): let it finish; nothing was changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, CheckFromSnapshot(tt.ins, tt.q, ""), tt.err)
		})
	}
}

func q(healthy bool, detail string) QuorumState { return QuorumState{Healthy: healthy, Detail: detail} }

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want == "":
	case err == nil:
		t.Errorf("accepted, want refused with %q", want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("err = %q, want it to contain %q", err, want)
	}
}

// TestAccept: a new request becomes a journal at its first step; asked
// again, the recovery under way (or done) is the same journal; another
// recovery while one is under way, and an invalid request, are refused
// with the journal unchanged.
func TestAccept(t *testing.T) {
	// The caller's clock in another zone: the journal keeps UTC.
	at := now.In(time.FixedZone("CET", 3600))
	src := Request{ID: "r1", Role: RoleSource, Source: "node1", OldClusterID: 0xc1}
	fenced := Request{ID: "r1", Role: RoleFenced, Source: "node1", OldClusterID: 0xc1}
	snap := Request{ID: "r1", Role: RoleSource, Source: "node1", Snapshot: "/snap/a.db", RevisionBump: 1000}
	open := Journal{Request: Request{ID: "r1", Role: RoleSource, Source: "node1"}, Step: StepStopped, StartedAt: now.Add(-time.Hour), OldMemberID: 1}
	openFenced := Journal{Request: fenced, Step: StepFenced, StartedAt: now.Add(-time.Hour), OldMemberID: 2}
	done := Journal{Request: Request{ID: "r1", Role: RoleSource, Source: "node1"}, Step: StepDone, StartedAt: now.Add(-time.Hour), ClusterID: 0xc1, MemberID: 1}
	refused := Journal{Request: Request{ID: "r0", Role: RoleSource, Source: "node3"}, Step: StepRefused, Error: "a quorum of voters is healthy"}
	doneOther := done
	doneOther.ID = "r0"

	tests := []struct {
		name string
		cur  Journal
		r    Request
		old  uint64
		want Journal // the journal returned (cur itself when refused)
		err  string  // "" when accepted
	}{
		{name: "new request, the source: requested, its member kept", r: src, old: 1,
			want: Journal{Request: src, Step: StepRequested, StartedAt: now, OldMemberID: 1}},
		{name: "new request, fenced: fenced at once, its old member kept", r: fenced, old: 2,
			want: Journal{Request: fenced, Step: StepFenced, StartedAt: now, OldMemberID: 2}},
		{name: "new request from a snapshot, no member on this host", r: snap, old: 0,
			want: Journal{Request: snap, Step: StepRequested, StartedAt: now}},
		{name: "after a refused recovery: a new one", cur: refused, r: fenced, old: 2,
			want: Journal{Request: fenced, Step: StepFenced, StartedAt: now, OldMemberID: 2}},
		{name: "after another recovery was done: a new one", cur: doneOther, r: src, old: 1,
			want: Journal{Request: src, Step: StepRequested, StartedAt: now, OldMemberID: 1}},
		{name: "the same ID and role again while open: unchanged", cur: open, r: src, old: 7, want: open},
		{name: "the same fenced request again: unchanged (the old member stays the one fenced)", cur: openFenced, r: fenced, old: 9, want: openFenced},
		{name: "the same ID after it is done: unchanged", cur: done, r: src, old: 1, want: done},
		{name: "the same ID, another role, while open: refused", cur: open, r: fenced, old: 1, want: open,
			err: "recovery r1 is under way here (source, step stopped): one at a time"},
		{name: "another ID while one is open: refused", cur: open, r: Request{ID: "r2", Role: RoleSource, Source: "node1"}, old: 1, want: open,
			err: "recovery r1 is under way here"},
		{name: "invalid: no ID", cur: refused, r: Request{Role: RoleSource, Source: "node1"}, want: refused, err: "no recovery id"},
		{name: "invalid: no source", r: Request{ID: "r1", Role: RoleFenced}, err: "no source member"},
		{name: "invalid: an unknown role", r: Request{ID: "r1", Role: "leader", Source: "node1"}, err: `role "leader": want "source" or "fenced"`},
		{name: "invalid: no role", r: Request{ID: "r1", Source: "node1"}, err: `role "": want "source" or "fenced"`},
		{name: "invalid: a fenced host restoring a snapshot", cur: open, r: Request{ID: "r1", Role: RoleFenced, Source: "node1", Snapshot: "/s.db"}, want: open,
			err: "only the source restores a snapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Accept(tt.cur, tt.r, tt.old, at)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && err == nil:
				t.Fatalf("accepted as %+v, want refused with %q", got, tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Errorf("err = %q, want it to contain %q", err, tt.err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("journal =\n  %+v\nwant\n  %+v", got, tt.want)
			}
			if tt.err != "" && !reflect.DeepEqual(got, tt.cur) {
				t.Errorf("a refusal changed the journal: %+v, had %+v", got, tt.cur)
			}
		})
	}
}

// TestJournalOpen: a journal is open from its first step until done or
// refused.
func TestJournalOpen(t *testing.T) {
	for step, want := range map[Step]bool{"": false, StepRequested: true, StepStopped: true, StepMoved: true, StepRestored: true,
		StepForced: true, StepFenced: true, StepDone: false, StepRefused: false} {
		if got := (Journal{Step: step}).Open(); got != want {
			t.Errorf("step %q: Open = %v, want %v", step, got, want)
		}
	}
}

// TestSaveLoad: a missing journal is the zero journal; a saved one reads
// back; a damaged one is an error, never taken for no recovery.
func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recovery.json")
	if j, err := Load(path); err != nil || j.Step != "" {
		t.Fatalf("missing journal: %+v, %v; want the zero journal", j, err)
	}
	j := Journal{Request: Request{ID: "r1", Role: RoleFenced, Source: "node1", OldClusterID: 0xc1}, Step: StepFenced, StartedAt: now, OldMemberID: 2}
	if err := Save(path, j); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt.IsZero() {
		t.Error("Save did not stamp UpdatedAt")
	}
	got.UpdatedAt = time.Time{}
	if !reflect.DeepEqual(got, j) {
		t.Errorf("read back %+v, want %+v", got, j)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("damaged journal: err = %v, want does not parse", err)
	}
}

// TestAcceptAbortAndID: an abort calls off only the fence of that
// recovery; an ID that could name a path is refused.
func TestAcceptAbortAndID(t *testing.T) {
	now := time.Now()
	fenced := Journal{Request: Request{ID: "r1", Role: RoleFenced, Source: "a"}, Step: StepFenced}
	j, err := Accept(fenced, Request{ID: "r1", Role: RoleFenced, Source: "a", Abort: true}, 0, now)
	if err != nil || j.Step != StepAborted || j.Open() {
		t.Errorf("abort of the fence: %v %v, want step aborted", j.Step, err)
	}
	if _, err := Accept(fenced, Request{ID: "r2", Role: RoleFenced, Source: "a", Abort: true}, 0, now); err == nil {
		t.Errorf("an abort of another recovery was taken")
	}
	src := Journal{Request: Request{ID: "r1", Role: RoleSource, Source: "a"}, Step: StepForced}
	if _, err := Accept(src, Request{ID: "r1", Role: RoleFenced, Source: "a", Abort: true}, 0, now); err == nil {
		t.Errorf("an abort called off a source")
	}
	for _, id := range []string{"../x", "/../..", "a/b", "", ".hidden"} {
		if err := (Request{ID: id, Role: RoleFenced, Source: "a"}).Check(); err == nil {
			t.Errorf("id %q taken", id)
		}
	}
}

// TestCheckFromSameRecovery: a host already fenced by this recovery does
// not block it (recover run again, or on the next host in turn); another
// recovery under way does.
func TestCheckFromSameRecovery(t *testing.T) {
	fenced := &Journal{Request: Request{ID: "r1", Role: RoleFenced, Source: "a"}, Step: StepFenced}
	ins := []Inspection{{Name: "a", Reachable: true, Data: "healthy", Index: 9}, {Name: "b", Reachable: true, Data: "corrupt", Recovery: fenced}}
	if err := CheckFrom(ins, "a", QuorumState{}, "r1"); err != nil {
		t.Errorf("the same recovery: %v", err)
	}
	if err := CheckFrom(ins, "a", QuorumState{}, "r2"); err == nil {
		t.Errorf("another recovery under way was not refused")
	}
}
