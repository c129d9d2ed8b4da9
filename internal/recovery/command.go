package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Agents is how `recover` reaches the members' agents: GET and POST
// /recovery (cmd/etcdkeeper's client implements it, whatever the
// transport).
type Agents interface {
	// Inspect asks member name's agent for its report; an agent that
	// cannot be asked is reported with Reachable false and Error.
	Inspect(ctx context.Context, name string) Inspection
	// Post sends r to member name's agent and returns its journal.
	Post(ctx context.Context, name string, r Request) (Journal, error)
}

// RefusedError is an agent's answer that it did not take a request
// (and journaled nothing), as opposed to an answer that was lost.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Deadlines bound each phase of a recovery on its own: one slow phase
// never eats the time of the one that calls the fences off.
type Deadlines struct {
	// Call bounds one GET or POST.
	Call time.Duration
	// SourceStart is how long recover waits for the source to start
	// after its POST; Poll how often it reads the source's journal;
	// SourceSilent how long the source's agent may not answer, once it
	// took the request, before recover leaves the recovery to it.
	SourceStart, Poll, SourceSilent time.Duration
	// FencesDown is how long recover waits, after the fences, for every
	// fenced member to have stopped before it asks the source.
	FencesDown time.Duration
}

// DefaultDeadlines are recover's. FencesDown: a fenced agent stops its
// old member once it has had no leader for 3 s, asked at each pass (up to
// its 5 s steady period apart).
var DefaultDeadlines = Deadlines{Call: 20 * time.Second, SourceStart: 2 * time.Minute, Poll: time.Second, SourceSilent: 5 * time.Second,
	FencesDown: 30 * time.Second}

// Command is one `recover --yes` (or --abort) run, carried out through
// Agents; Say prints one line of progress.
type Command struct {
	Agents    Agents
	Say       func(format string, args ...any)
	Deadlines Deadlines
	// Spec is the spec's member names, in its order; Config the spec
	// file, for the commands recover prints.
	Spec   []string
	Config string
}

// Recovery is what Start carries out.
type Recovery struct {
	// Request is the source's request (its ID, source, snapshot).
	Request Request
	// Started: the source's agent has the recovery already.
	Started bool
	Assumed []string
}

// ErrLeft marks a recovery whose fences stay while nobody can say
// whether its source goes on.
var ErrLeft = errors.New("the fences stay")

// Start fences every member but the source (the majority checked before
// and after the fences), posts the source, and follows its journal until
// it has started; it calls the fences off when the source is known not to
// go on. ins is the plan's inspection of every member. It returns nil
// once the source has started (or was not reached: its host's command is
// printed).
func (c Command) Start(ctx context.Context, ins []Inspection, rec Recovery) error {
	req, src := rec.Request, rec.Request.Source
	m := KnownVoters(c.Spec, ins)
	fence, missed := FencePlan(ins, src)
	if err := CheckCovered(m, src, fence, rec.Assumed); err != nil {
		return fmt.Errorf("recovery refused: %w", err)
	}
	// Fence first: no old member may run once the source is forced.
	var fenced []string
	for _, n := range fence {
		if ctx.Err() != nil {
			// Interrupted before the source was asked: nothing can have
			// started, so the fences are called off.
			c.callOff(ctx, req.ID, src, fenced)
			return fmt.Errorf("recovery %s interrupted before its source was asked: %w", req.ID, ctx.Err())
		}
		r := req
		r.Role, r.Snapshot, r.RevisionBump = RoleFenced, "", 0
		j, err := c.post(ctx, n, r)
		if err != nil {
			c.Say("  %s: not fenced: %v", n, err)
			missed = append(missed, n)
			continue
		}
		fenced = append(fenced, n)
		c.Say("  %s: fenced (step %s): its old member stays stopped; it rejoins the recovered cluster", n, j.Step)
	}
	if err := CheckCovered(m, src, fenced, rec.Assumed); err != nil {
		c.callOff(ctx, req.ID, src, fenced)
		return fmt.Errorf("recovery refused: %w", err)
	}
	if err := c.waitFencesDown(ctx, req.ID, fenced); err != nil {
		c.callOff(ctx, req.ID, src, fenced)
		return fmt.Errorf("recovery refused: %w", err)
	}
	srcIn := find(ins, src)
	switch {
	case !srcIn.Reachable:
		c.Say("  %s (the source) was not reached: on %s, run: etcdkeeper recover --config %s --from %s --yes --id %s --assume-fenced %s",
			src, src, c.Config, src, req.ID, joinNames(append(fenced, rec.Assumed...)))
		return nil
	case rec.Started:
		c.Say("  %s: source (it has recovery %s already)", src, req.ID)
	default:
		if err := c.startSource(ctx, req, fenced); err != nil {
			return err
		}
	}
	for _, n := range missed {
		if !contains(rec.Assumed, n) {
			c.Say("  %s was not reached: on %s, run: etcdkeeper recover --config %s --from %s --yes --id %s", n, n, c.Config, src, req.ID)
		}
	}
	return nil
}

// waitFencesDown waits until every fenced member's old etcd has stopped
// under its fence. A fenced agent stops its member only after it has had
// no leader for a while, and ends the fence by itself when the member
// regains one: the source must not be forced while any old member may
// still run (a partition that heals right after the fences).
func (c Command) waitFencesDown(ctx context.Context, id string, fenced []string) error {
	if len(fenced) == 0 {
		return nil
	}
	deadline := time.Now().Add(c.Deadlines.FencesDown)
	for {
		var ins []Inspection
		for _, n := range fenced {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Deadlines.Call)
			ins = append(ins, c.Agents.Inspect(cctx, n))
			cancel()
		}
		d := DecideFencesDown(ins, id)
		if d.Down {
			c.Say("  fenced members stopped: %s", joinNames(fenced))
			return nil
		}
		if d.Ended != "" {
			return fmt.Errorf("%s", d.Ended)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after %v, %s", c.Deadlines.FencesDown, d.Waiting)
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.Deadlines.Poll):
		}
	}
}

// startSource posts the source's request and follows its journal.
func (c Command) startSource(ctx context.Context, req Request, fenced []string) error {
	src := req.Source
	st := SourceState{ID: req.ID, Limit: c.Deadlines.SourceStart, SilentLimit: c.Deadlines.SourceSilent}
	j, err := c.post(ctx, src, req)
	var refused *RefusedError
	switch {
	case err == nil:
		st.Post, st.Journal, st.Read = PostAccepted, &j, true
		c.Say("  %s: source (step %s)", src, j.Step)
	case errors.As(err, &refused):
		st.Post, st.PostError = PostRefused, err.Error()
	default:
		st.Post, st.PostError = PostAmbiguous, err.Error()
	}
	begin, answered := time.Now(), time.Now()
	for first := true; ; first = false {
		if !first || st.Post != PostAccepted {
			c.readSource(ctx, src, &st)
		}
		if st.Read {
			answered = time.Now()
		}
		st.Waited, st.Silent = time.Since(begin), time.Since(answered)
		d := DecideSource(st)
		switch d.Verdict {
		case SourceStarted:
			c.Say("  %s: %s", src, d.Reason)
			return nil
		case SourceCallOff:
			c.Say("  %s: %s: calling the fences off", src, d.Reason)
			c.callOff(ctx, req.ID, src, fenced)
			return fmt.Errorf("recovery %s did not go on: %s", req.ID, d.Reason)
		case SourceHandedOver:
			c.Say("  %s: %s; follow it with etcdkeeper status (or: etcdkeeper recover --config %s)", src, d.Reason, c.Config)
			return nil
		case SourceLeave:
			c.Say("  %s: %s", src, d.Reason)
			return fmt.Errorf("%w: recovery %s: %s; when you know that %s will never start it: etcdkeeper recover --config %s --abort %s --force",
				ErrLeft, req.ID, d.Reason, src, c.Config, req.ID)
		}
		select {
		case <-ctx.Done():
			st.Limit = 0 // interrupted: decide now with what is known
		case <-time.After(c.Deadlines.Poll):
		}
	}
}

// readSource reads the source's journal again (GET).
func (c Command) readSource(ctx context.Context, src string, st *SourceState) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Deadlines.Call)
	defer cancel()
	in := c.Agents.Inspect(cctx, src)
	if !in.Reachable || in.Name != src {
		st.Read = false
		return
	}
	st.Read = true
	if in.Recovery != nil {
		st.Journal = in.Recovery
	} else {
		st.Journal = nil
	}
}

// Abort calls off the open fences of recovery id (recover --abort).
func (c Command) Abort(ctx context.Context, ins []Inspection, id string, force bool) error {
	p, err := DecideAbort(ins, id, force)
	if err != nil {
		return err
	}
	c.Say("")
	c.Say("Calling off recovery %s:", id)
	if n := c.callOff(ctx, id, p.Source, p.Fenced); n > 0 {
		return fmt.Errorf("%d fence(s) of recovery %s could not be called off", n, id)
	}
	return nil
}

// callOff calls the fences off: their old members run as before. Each
// call has its own deadline, whatever is left of ctx. It returns how many
// failed.
func (c Command) callOff(ctx context.Context, id, src string, fenced []string) int {
	failed := 0
	for _, n := range fenced {
		r := Request{ID: id, Role: RoleFenced, Source: src, Abort: true}
		if _, err := c.post(context.WithoutCancel(ctx), n, r); err != nil {
			failed++
			c.Say("  %s: the fence could not be called off: %v (on %s, run: etcdkeeper recover --config %s --abort %s)", n, err, n, c.Config, id)
			continue
		}
		c.Say("  %s: fence called off", n)
	}
	return failed
}

func (c Command) post(ctx context.Context, name string, r Request) (Journal, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Deadlines.Call)
	defer cancel()
	return c.Agents.Post(cctx, name, r)
}

func find(ins []Inspection, name string) Inspection {
	for _, i := range ins {
		if i.Name == name {
			return i
		}
	}
	return Inspection{Name: name}
}

func contains(ns []string, n string) bool {
	for _, x := range ns {
		if strings.EqualFold(x, n) {
			return true
		}
	}
	return false
}
