package recovery

import (
	"strings"
	"testing"
	"time"
)

// member is an inspection for the table tests: name, reachable, the
// member ID its data has, and the voters it reports ("id=name", or "id="
// for a member added but never started).
func member(name string, reachable bool, id string, voters ...string) Inspection {
	in := Inspection{Name: name, Reachable: reachable, MemberID: id}
	for _, v := range voters {
		vid, vname, _ := strings.Cut(v, "=")
		in.Voters = append(in.Voters, Voter{ID: vid, Name: vname})
	}
	if len(voters) > 0 {
		in.VotersFrom = VotersDB
	}
	return in
}

func specOf(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, "n"+string(rune('0'+i)))
	}
	return out
}

// TestCheckCovered: a recovery goes on only while the source, the fenced
// and the assumed are a strict majority of every voter set anyone knows
// (the spec, each member's data, their union): then no old majority, and
// no second recovery, can go on next to it. Issue 20 / F1: on 8011516
// recover counted the spec and asked only that fewer than a quorum stay
// unfenced, and allowed the first four rows.
func TestCheckCovered(t *testing.T) {
	three := []string{"a1=n1", "a2=n2", "a3=n3"}
	four := []string{"a1=n1", "a2=n2", "a3=n3", "a4=n4"}
	five := []string{"a1=n1", "a2=n2", "a3=n3", "a4=n4", "a5=n5"}
	tests := []struct {
		name    string
		spec    int
		ins     []Inspection
		source  string
		fenced  []string
		assumed []string
		refused bool
	}{
		{name: "spec 4, cluster 3 (scale-up under way), {n1,n4}|{n2,n3}, from n1: refused", spec: 4,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, ""), member("n4", true, "")},
			source: "n1", fenced: []string{"n4"}, refused: true},
		{name: "spec 3 behind cluster 5, {n1,n2}|{n3,n4,n5}, from n1: refused", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", five...), member("n2", true, "a2", five...), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}, refused: true},
		{name: "4 = 4, {n1,n2}|{n3,n4}, from n1: refused", spec: 4,
			ins:    []Inspection{member("n1", true, "a1", four...), member("n2", true, "a2", four...), member("n3", false, ""), member("n4", false, "")},
			source: "n1", fenced: []string{"n2"}, refused: true},
		{name: "4 = 4, {n1,n2}|{n3,n4}, from n3: refused", spec: 4,
			ins:    []Inspection{member("n1", false, ""), member("n2", false, ""), member("n3", true, "a3", four...), member("n4", true, "a4", four...)},
			source: "n3", fenced: []string{"n4"}, refused: true},
		{name: "2 = 2, from n1 alone: refused", spec: 2,
			ins:    []Inspection{member("n1", true, "a1", "a1=n1", "a2=n2"), member("n2", false, "")},
			source: "n1", refused: true},
		{name: "spec 5, cluster 3, {n1,n4,n5}|{n2,n3}: a majority of the union, not of the cluster n1's data knows: refused", spec: 5,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, ""), member("n4", true, ""), member("n5", true, "")},
			source: "n1", fenced: []string{"n4", "n5"}, refused: true},
		{name: "3, 2 of 3: source and one fenced", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", true, "a2", three...), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}},
		{name: "3, 2 of 3: source and one assumed", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, "")},
			source: "n1", assumed: []string{"n3"}},
		{name: "5, 3 of 5", spec: 5,
			ins:    []Inspection{member("n1", true, "a1", five...), member("n2", true, "a2"), member("n3", true, "a3"), member("n4", false, ""), member("n5", false, "")},
			source: "n1", fenced: []string{"n2", "n3"}},
		{name: "5, 2 of 5: refused", spec: 5,
			ins:    []Inspection{member("n1", true, "a1", five...), member("n2", true, "a2"), member("n3", false, ""), member("n4", false, ""), member("n5", false, "")},
			source: "n1", fenced: []string{"n2"}, refused: true},
		{name: "3, the source cut off from both others: refused", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, "")},
			source: "n1", refused: true},
		{name: "3, both others vouched for", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, "")},
			source: "n1", assumed: []string{"n2", "n3"}},
		{name: "3, no voters reported: the spec counts", spec: 3,
			ins:    []Inspection{member("n1", true, ""), member("n2", true, ""), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}},
		{name: "3 + a member added, never started (an ID only): refused", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", "a1=n1", "a2=n2", "a3=n3", "a9="), member("n2", true, "a2"), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}, refused: true},
		{name: "3 + a member added, never started, vouched for by its ID", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", "a1=n1", "a2=n2", "a3=n3", "a9="), member("n2", true, "a2"), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}, assumed: []string{"A9"}},
		{name: "3, a member rejoined under a new ID: one voter, by its name", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", "a1=n1", "a2=n2", "a3=n3"), member("n2", true, "b2", "a1=n1", "b2=n2", "a3=n3"), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}},
		{name: "3, a voter the spec dropped, still in the data: refused", spec: 3,
			ins:    []Inspection{member("n1", true, "a1", "a1=n1", "a2=n2", "a3=n3", "a4=n4"), member("n2", true, "a2"), member("n3", false, "")},
			source: "n1", fenced: []string{"n2"}, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := KnownVoters(specOf(tt.spec), tt.ins)
			err := CheckCovered(m, tt.source, tt.fenced, tt.assumed)
			if (err != nil) != tt.refused {
				t.Fatalf("err = %v, refused %v (voters known: %d)", err, tt.refused, m.Size())
			}
			if err != nil && (!strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), "cannot be fenced from here")) {
				t.Errorf("the refusal does not say who and that nothing changed: %v", err)
			}
		})
	}
}

// TestKnownVotersJoins: the union joins by ID and by name.
func TestKnownVotersJoins(t *testing.T) {
	m := KnownVoters(specOf(3), []Inspection{
		member("n1", true, "a1", "a1=n1", "a2=n2", "a3=n3"),
		member("n2", true, "b2", "a1=n1", "b2=n2", "a3=n3", "a4="),
	})
	if m.Size() != 4 {
		t.Errorf("Size = %d, want 4 (n1, n2 under two IDs, n3, an unnamed a4)", m.Size())
	}
}

func journal(id string, role Role, step Step) *Journal {
	return &Journal{Request: Request{ID: id, Role: role, Source: "n1"}, Step: step, Error: "a quorum is healthy"}
}

// TestDecideSource: the source's answer and journal. Issue 20 / F7, F8:
// on 8011516 a lost answer called the fences off and a refusal after the
// POST left them for good.
func TestDecideSource(t *testing.T) {
	lim := 2 * time.Minute
	tests := []struct {
		name string
		st   SourceState
		want SourceVerdict
	}{
		{"accepted, requested", SourceState{ID: "r1", Post: PostAccepted, Read: true, Journal: journal("r1", RoleSource, StepRequested), Limit: lim}, SourceWait},
		{"accepted, forced", SourceState{ID: "r1", Post: PostAccepted, Read: true, Journal: journal("r1", RoleSource, StepForced), Limit: lim}, SourceStarted},
		{"accepted, done", SourceState{ID: "r1", Post: PostAccepted, Read: true, Journal: journal("r1", RoleSource, StepDone), Limit: lim}, SourceStarted},
		{"refused after the POST (it saw a quorum)", SourceState{ID: "r1", Post: PostAccepted, Read: true, Journal: journal("r1", RoleSource, StepRefused), Limit: lim}, SourceCallOff},
		{"refused at once", SourceState{ID: "r1", Post: PostRefused, PostError: "healthy voter", Read: true, Limit: lim}, SourceCallOff},
		{"refused at once, another recovery's journal", SourceState{ID: "r1", Post: PostRefused, Read: true, Journal: journal("r0", RoleSource, StepDone), Limit: lim}, SourceCallOff},
		{"answer lost, journal read again: it has it", SourceState{ID: "r1", Post: PostAmbiguous, PostError: "timeout", Read: true, Journal: journal("r1", RoleSource, StepStopped), Limit: lim}, SourceWait},
		{"answer lost, journal read again: forced", SourceState{ID: "r1", Post: PostAmbiguous, PostError: "timeout", Read: true, Journal: journal("r1", RoleSource, StepForced), Limit: lim}, SourceStarted},
		{"answer lost, journal read again: not there", SourceState{ID: "r1", Post: PostAmbiguous, PostError: "timeout", Read: true, Limit: lim}, SourceCallOff},
		{"answer lost, journal unreadable: the fences stay", SourceState{ID: "r1", Post: PostAmbiguous, PostError: "timeout", Limit: lim}, SourceLeave},
		{"refused, journal unreadable: the fences stay", SourceState{ID: "r1", Post: PostRefused, PostError: "x", Limit: lim}, SourceLeave},
		{"accepted, not started in time: the fences stay", SourceState{ID: "r1", Post: PostAccepted, Read: true, Journal: journal("r1", RoleSource, StepStopped), Waited: lim, Limit: lim}, SourceLeave},
		{"accepted, source unreachable since, briefly: wait", SourceState{ID: "r1", Post: PostAccepted, Journal: journal("r1", RoleSource, StepRequested), Limit: lim, Silent: time.Second, SilentLimit: 5 * time.Second}, SourceWait},
		{"accepted, then its agent stopped answering: handed over", SourceState{ID: "r1", Post: PostAccepted, Journal: journal("r1", RoleSource, StepStopped), Limit: lim, Silent: 5 * time.Second, SilentLimit: 5 * time.Second}, SourceHandedOver},
		{"answer lost, then the journal read once, then silent: handed over", SourceState{ID: "r1", Post: PostAmbiguous, Journal: journal("r1", RoleSource, StepRequested), Limit: lim, Silent: 5 * time.Second, SilentLimit: 5 * time.Second}, SourceHandedOver},
		{"accepted, refused, then silent: the fences are called off", SourceState{ID: "r1", Post: PostAccepted, Journal: journal("r1", RoleSource, StepRefused), Limit: lim, Silent: time.Minute, SilentLimit: 5 * time.Second}, SourceCallOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideSource(tt.st)
			if d.Verdict != tt.want || d.Reason == "" {
				t.Errorf("DecideSource = %v (%s), want %v", d.Verdict, d.Reason, tt.want)
			}
		})
	}
}

// TestDecideAbort: --abort calls off open fences, never once the source
// started, and not while the source is out of reach unless forced (F8).
func TestDecideAbort(t *testing.T) {
	fence := func(name string, reachable bool, j *Journal) Inspection {
		return Inspection{Name: name, Reachable: reachable, Recovery: j}
	}
	tests := []struct {
		name   string
		ins    []Inspection
		force  bool
		fenced []string
		errHas string
	}{
		{"source refused", []Inspection{fence("n1", true, journal("r1", RoleSource, StepRefused)), fence("n2", true, journal("r1", RoleFenced, StepFenced))}, false, []string{"n2"}, ""},
		{"source never asked", []Inspection{fence("n1", true, nil), fence("n2", true, journal("r1", RoleFenced, StepFenced))}, false, []string{"n2"}, ""},
		{"source started", []Inspection{fence("n1", true, journal("r1", RoleSource, StepStopped)), fence("n2", true, journal("r1", RoleFenced, StepFenced))}, true, nil, "has started"},
		{"source unreachable", []Inspection{fence("n1", false, nil), fence("n2", true, journal("r1", RoleFenced, StepFenced))}, false, nil, "cannot be reached"},
		{"source unreachable, --force", []Inspection{fence("n1", false, nil), fence("n2", true, journal("r1", RoleFenced, StepFenced))}, true, []string{"n2"}, ""},
		{"no open fence", []Inspection{fence("n1", true, nil), fence("n2", true, journal("r1", RoleFenced, StepAborted))}, false, nil, "no open fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecideAbort(tt.ins, "r1", tt.force)
			switch {
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Errorf("err = %v, want %q", err, tt.errHas)
			case tt.errHas == "" && (err != nil || strings.Join(p.Fenced, ",") != strings.Join(tt.fenced, ",")):
				t.Errorf("DecideAbort = %v, %v; want %v", p, err, tt.fenced)
			}
		})
	}
}

// TestFenceStale: a fence is stale after FenceStaleAfter without its
// source starting; a fence that is over is not.
func TestFenceStale(t *testing.T) {
	now := time.Now()
	j := journal("r1", RoleFenced, StepFenced)
	j.StartedAt = now.Add(-FenceStaleAfter - time.Second)
	if !FenceStale(j, now) {
		t.Errorf("an old fence is not stale")
	}
	if FenceStale(j, j.StartedAt.Add(time.Minute)) {
		t.Errorf("a young fence is stale")
	}
	for _, s := range []Step{StepDone, StepAborted} {
		k := *j
		k.Step = s
		if FenceStale(&k, now) {
			t.Errorf("a fence at %s is stale", s)
		}
	}
	if FenceStale(nil, now) {
		t.Errorf("no journal is stale")
	}
}

func TestDecideRecovered(t *testing.T) {
	if done, err := DecideRecovered(3, 3, 3, 0, time.Minute); !done || err != nil {
		t.Errorf("3 of 3: %v %v", done, err)
	}
	if done, err := DecideRecovered(2, 3, 3, time.Second, time.Minute); done || err != nil {
		t.Errorf("2 of 3, in time: %v %v", done, err)
	}
	if done, err := DecideRecovered(2, 3, 3, time.Minute, time.Minute); !done || err == nil {
		t.Errorf("2 of 3, late: %v %v", done, err)
	}
}

// TestResume: --id names a recovery to go on with; its source must be
// the one asked for, and a source that has it already is not asked to
// start again (nor refused for the quorum it left).
func TestResume(t *testing.T) {
	src := &Journal{Request: Request{ID: "r1", Role: RoleSource, Source: "n1"}, Step: StepForced}
	ins := []Inspection{{Name: "n1", Reachable: true, Recovery: src}, {Name: "n2"}}
	if started, err := Resume("r1", "n1", ins); err != nil || !started {
		t.Errorf("Resume(r1, n1) = %v %v, want started", started, err)
	}
	if _, err := Resume("r1", "n2", ins); err == nil || !strings.Contains(err.Error(), "is from n1") {
		t.Errorf("another source for r1: %v", err)
	}
	if _, err := Resume("../x", "n1", ins); err == nil {
		t.Errorf("an id that names a path was taken")
	}
	if started, err := Resume("r2", "n1", ins); err != nil || started {
		t.Errorf("a recovery nobody has: %v %v", started, err)
	}
}

// TestDecideFencesDown: the source is asked only once every fenced member
// reports the recovery's fence open and its old etcd stopped.
func TestDecideFencesDown(t *testing.T) {
	fenced := func(name string, running bool) Inspection {
		return Inspection{Name: name, Reachable: true, EtcdRunning: running,
			Recovery: &Journal{Request: Request{ID: "r1", Role: RoleFenced, Source: "n1"}, Step: StepFenced}}
	}
	aborted := fenced("n3", false)
	aborted.Recovery.Step = StepAborted
	other := fenced("n3", false)
	other.Recovery.ID = "r0"
	tests := []struct {
		name string
		ins  []Inspection
		// want is "down", "waiting" or "ended"; with: in its text.
		want, with string
	}{
		{"every fenced member stopped", []Inspection{fenced("n2", false), fenced("n3", false)}, "down", ""},
		{"none fenced", nil, "down", ""},
		{"one still runs: wait", []Inspection{fenced("n2", true), fenced("n3", false)}, "waiting", "n2 (its old member still runs"},
		{"one not reached: wait (it may run)", []Inspection{fenced("n2", false), {Name: "n3", Error: "timeout"}}, "waiting", "n3 (not reached: timeout)"},
		{"one fence ended by itself: never go on", []Inspection{fenced("n2", true), aborted}, "ended", "n3's fence of recovery r1 ended (step aborted)"},
		{"one holds another recovery: never go on", []Inspection{fenced("n2", false), other}, "ended", "n3 no longer holds the fence"},
		{"one lost its journal: never go on", []Inspection{fenced("n2", false), {Name: "n3", Reachable: true}}, "ended", "n3 no longer holds the fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideFencesDown(tt.ins, "r1")
			got, text := "down", ""
			switch {
			case d.Ended != "":
				got, text = "ended", d.Ended
			case d.Waiting != "":
				got, text = "waiting", d.Waiting
			case !d.Down:
				got = "nothing"
			}
			if got != tt.want || !strings.Contains(text, tt.with) {
				t.Errorf("DecideFencesDown = %s %q, want %s with %q", got, text, tt.want, tt.with)
			}
		})
	}
}
