package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAgents answers for each member as told; it records the POSTs.
type fakeAgents struct {
	mu       *sync.Mutex
	journals map[string]*Journal
	// down: the agent does not answer; lost: the source journals the
	// POST but the answer is lost; refuse: the source answers 202, then
	// its loop refuses at the nth GET.
	down map[string]bool
	lost bool
	// die: the source's agent is killed right after it journals the POST.
	die      bool
	refuseAt int
	gets     int
	posts    []string
	// endFence: this fenced member's fence ends by itself (its old member
	// found a leader) before recover looks; running: these fenced
	// members' old etcd keeps running.
	endFence string
	running  map[string]bool
}

func (f *fakeAgents) Inspect(_ context.Context, name string) Inspection {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[name] {
		return Inspection{Name: name, Error: "connection refused"}
	}
	in := Inspection{Name: name, Reachable: true, EtcdRunning: f.running[name]}
	if j := f.journals[name]; j != nil && name == f.endFence && j.Step == StepFenced {
		j.Step = StepAborted
	}
	if j := f.journals[name]; j != nil {
		if j.Role == RoleSource {
			f.gets++
			if f.refuseAt > 0 && f.gets >= f.refuseAt {
				j.Step, j.Error = StepRefused, "3 of 3 voters are healthy"
			}
		}
		c := *j
		in.Recovery = &c
	}
	return in
}

func (f *fakeAgents) Post(_ context.Context, name string, r Request) (Journal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := "fence"
	switch {
	case r.Abort:
		what = "abort"
	case r.Role == RoleSource:
		what = "source"
	}
	f.posts = append(f.posts, what+" "+name)
	if f.down[name] {
		return Journal{}, errors.New("connection refused")
	}
	if r.Abort {
		j := f.journals[name]
		if j == nil || !j.Open() {
			return Journal{}, &RefusedError{Reason: "no fence"}
		}
		j.Step = StepAborted
		return *j, nil
	}
	step := StepFenced
	if r.Role == RoleSource {
		step = StepRequested
	}
	j := &Journal{Request: r, Step: step, StartedAt: time.Now()}
	f.journals[name] = j
	if r.Role == RoleSource && f.die {
		f.down = map[string]bool{name: true}
	}
	if r.Role == RoleSource && f.lost {
		return Journal{}, context.DeadlineExceeded
	}
	return *j, nil
}

func (f *fakeAgents) steps() map[string]Step {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Step{}
	for n, j := range f.journals {
		out[n] = j.Step
	}
	return out
}

// TestCommandStart: the sequence of one recover --yes over fake agents:
// the fences first, then the source; the fences are called off when the
// source refuses after them (F7) or did not take the request, and only
// then: a lost answer of a source that took it, or one that cannot be
// read, leaves them (F8).
func TestCommandStart(t *testing.T) {
	three := []string{"a1=n1", "a2=n2", "a3=n3"}
	all := []Inspection{member("n1", true, "a1", three...), member("n2", true, "a2", three...), member("n3", true, "a3", three...)}
	tests := []struct {
		name string
		ins  []Inspection
		fake fakeAgents
		// after: the source's journal moves to forced at once (its loop).
		forced    bool
		wantErr   string
		wantSteps map[string]Step
		wantPosts string
	}{
		{name: "source starts", ins: all, forced: true,
			wantSteps: map[string]Step{"n1": StepForced, "n2": StepFenced, "n3": StepFenced},
			wantPosts: "fence n2,fence n3,source n1"},
		{name: "source refuses after the fences (it sees a quorum): fences called off", ins: all, fake: fakeAgents{refuseAt: 1},
			wantErr:   "the source refused the recovery: 3 of 3 voters are healthy",
			wantSteps: map[string]Step{"n1": StepRefused, "n2": StepAborted, "n3": StepAborted},
			wantPosts: "fence n2,fence n3,source n1,abort n2,abort n3"},
		{name: "the source's answer lost, its journal has it: the fences stay", ins: all, fake: fakeAgents{lost: true}, forced: true,
			wantSteps: map[string]Step{"n1": StepForced, "n2": StepFenced, "n3": StepFenced},
			wantPosts: "fence n2,fence n3,source n1"},
		{name: "the source's agent killed after it took the request: handed over, the fences stay", ins: all, fake: fakeAgents{die: true},
			wantSteps: map[string]Step{"n1": StepRequested, "n2": StepFenced, "n3": StepFenced},
			wantPosts: "fence n2,fence n3,source n1"},
		{name: "source never starts: the fences stay, reported", ins: all,
			wantErr:   "has not started after",
			wantSteps: map[string]Step{"n1": StepRequested, "n2": StepFenced, "n3": StepFenced},
			wantPosts: "fence n2,fence n3,source n1"},
		{name: "source down at its POST: fences stay (it may have it)", ins: all, fake: fakeAgents{down: map[string]bool{"n1": true}},
			wantErr:   "its journal cannot be read",
			wantSteps: map[string]Step{"n2": StepFenced, "n3": StepFenced},
			wantPosts: "fence n2,fence n3,source n1"},
		{name: "a fence ends by itself before the source is asked (the partition healed): the source is never asked", ins: all,
			fake:      fakeAgents{endFence: "n3"},
			wantErr:   "n3's fence of recovery r1 ended",
			wantSteps: map[string]Step{"n2": StepAborted, "n3": StepAborted},
			wantPosts: "fence n2,fence n3,abort n2,abort n3"},
		{name: "a fenced member's old etcd keeps running: the source is never asked", ins: all,
			fake:      fakeAgents{running: map[string]bool{"n2": true}},
			wantErr:   "not every fenced member has stopped: n2",
			wantSteps: map[string]Step{"n2": StepAborted, "n3": StepAborted},
			wantPosts: "fence n2,fence n3,abort n2,abort n3"},
		{name: "a fence fails: no majority after, the other called off", ins: []Inspection{member("n1", true, "a1", three...), member("n2", true, "a2"), member("n3", false, "")},
			fake:      fakeAgents{down: map[string]bool{"n2": true}},
			wantErr:   "recovery refused",
			wantSteps: map[string]Step{},
			wantPosts: "fence n2"},
		{name: "no majority before: nothing posted", ins: []Inspection{member("n1", true, "a1", three...), member("n2", false, ""), member("n3", false, "")},
			wantErr: "n2, n3 cannot be fenced from here", wantSteps: map[string]Step{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &tt.fake
			f.mu, f.journals = &sync.Mutex{}, map[string]*Journal{}
			if tt.forced {
				f.refuseAt = 0
			}
			var out strings.Builder
			c := Command{Agents: forcing{f, tt.forced}, Spec: specOf(3), Config: "F",
				Say: func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) },
				Deadlines: Deadlines{Call: time.Second, SourceStart: 200 * time.Millisecond, Poll: 10 * time.Millisecond, SourceSilent: 50 * time.Millisecond,
					FencesDown: 100 * time.Millisecond}}
			err := c.Start(context.Background(), tt.ins, Recovery{Request: Request{ID: "r1", Role: RoleSource, Source: "n1"}})
			t.Logf("output:\n%s", out.String())
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if got := f.steps(); !mapsEqual(got, tt.wantSteps) {
				t.Errorf("steps = %v, want %v", got, tt.wantSteps)
			}
			if got := strings.Join(f.posts, ","); got != tt.wantPosts {
				t.Errorf("posts = %s, want %s", got, tt.wantPosts)
			}
		})
	}
}

// forcing is the source's loop: a journaled source request is forced at
// the next look, when on.
type forcing struct {
	*fakeAgents
	on bool
}

func (f forcing) Inspect(ctx context.Context, name string) Inspection {
	if f.on {
		f.mu.Lock()
		if j := f.journals[name]; j != nil && j.Role == RoleSource && j.Step == StepRequested {
			j.Step = StepForced
		}
		f.mu.Unlock()
	}
	return f.fakeAgents.Inspect(ctx, name)
}

func mapsEqual(a, b map[string]Step) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCommandAbort: --abort calls off the fences the agents report, and
// refuses while the source cannot be reached unless forced (F8).
func TestCommandAbort(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			f := &fakeAgents{mu: &sync.Mutex{}, journals: map[string]*Journal{
				"n2": {Request: Request{ID: "r1", Role: RoleFenced, Source: "n1"}, Step: StepFenced},
			}, down: map[string]bool{"n1": true}}
			ins := []Inspection{f.Inspect(context.Background(), "n1"), f.Inspect(context.Background(), "n2")}
			c := Command{Agents: f, Spec: specOf(2), Config: "F", Say: func(string, ...any) {}, Deadlines: DefaultDeadlines}
			err := c.Abort(context.Background(), ins, "r1", force)
			if force != (err == nil) {
				t.Fatalf("force %v: err %v", force, err)
			}
			want := []string{}
			if force {
				want = []string{"abort n2"}
			}
			if !slices.Equal(f.posts, want) && !(len(f.posts) == 0 && len(want) == 0) {
				t.Errorf("posts %v, want %v", f.posts, want)
			}
		})
	}
}

// TestCommandInterrupted: recover interrupted (SIGINT) while it fences
// calls off the fences it made: the source was not asked.
func TestCommandInterrupted(t *testing.T) {
	three := []string{"a1=n1", "a2=n2", "a3=n3"}
	ins := []Inspection{member("n1", true, "a1", three...), member("n2", true, "a2", three...), member("n3", true, "a3", three...)}
	f := &fakeAgents{mu: &sync.Mutex{}, journals: map[string]*Journal{}}
	ctx, cancel := context.WithCancel(context.Background())
	c := Command{Agents: cancelAfterFirst{f, cancel}, Spec: specOf(3), Config: "F", Say: func(string, ...any) {}, Deadlines: DefaultDeadlines}
	err := c.Start(ctx, ins, Recovery{Request: Request{ID: "r1", Role: RoleSource, Source: "n1"}})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err = %v, want interrupted", err)
	}
	if got := strings.Join(f.posts, ","); got != "fence n2,abort n2" {
		t.Errorf("posts = %s, want the one fence made called off", got)
	}
}

// cancelAfterFirst cancels the command's context after the first POST.
type cancelAfterFirst struct {
	*fakeAgents
	cancel context.CancelFunc
}

func (f cancelAfterFirst) Post(ctx context.Context, name string, r Request) (Journal, error) {
	defer f.cancel()
	return f.fakeAgents.Post(ctx, name, r)
}
