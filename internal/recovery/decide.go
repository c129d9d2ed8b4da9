package recovery

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The decisions of `etcdkeeper recover --yes`, as pure functions: which
// agents to fence, whether the recovery may go on, what the source's
// answer means, when to call the fences off. Each tries its rules in a
// fixed order (the order is the point) and says why in one line.
// Command (command.go) carries them out through Agents; the CLI parses
// and prints.

// FenceStaleAfter is how long a fence may wait for its source to start
// before it is reported as stale (status, STATUS=, the
// etcdkeeper_recovery_fence_stale metric, the alert): it ends only by
// the source's start or `recover --abort ID`.
const FenceStaleAfter = 2 * time.Minute

// FenceStale: j is a fence that has waited for its source longer than
// FenceStaleAfter (its old member stays stopped meanwhile).
func FenceStale(j *Journal, now time.Time) bool {
	return j != nil && j.Role == RoleFenced && j.Step == StepFenced && now.Sub(j.StartedAt) > FenceStaleAfter
}

// FencePlan is the order of the fences: every member but the source, in
// the spec's order; the agents that answered are fenced, the others are
// missed (told later: recover --id on their hosts).
func FencePlan(ins []Inspection, source string) (fence, missed []string) {
	for _, i := range ins {
		switch {
		case i.Name == source:
		case i.Reachable:
			fence = append(fence, i.Name)
		default:
			missed = append(missed, i.Name)
		}
	}
	return fence, missed
}

// CheckCovered refuses a recovery unless the source, the members fenced
// (before the fences: those that could be) and those the operator
// vouched for (--assume-fenced) are a strict majority of every voter set
// anyone knows (Membership.CheckMajority).
func CheckCovered(m *Membership, source string, fenced, assumed []string) error {
	covered := append(append([]string{source}, fenced...), assumed...)
	if err := m.CheckMajority(covered); err != nil {
		return fmt.Errorf("%w. Make their agents reachable (agent.recoveryAddr), or run this command with --id on each of them first and then on %s with --assume-fenced, "+
			"or pass --assume-fenced for hosts that are off for good (a name, or a member ID for a member only an ID names); nothing was changed", err, source)
	}
	return nil
}

// PostResult is how the source's agent answered the POST.
type PostResult int

const (
	// PostAccepted: 202, with its journal.
	PostAccepted PostResult = iota
	// PostRefused: the agent answered with its reason (a 4xx): it
	// journaled nothing.
	PostRefused
	// PostAmbiguous: no answer, or one that does not say (a timeout, a
	// reset, a 5xx, a body that does not parse): the agent may have
	// journaled the request.
	PostAmbiguous
)

// SourceState is what recover knows of the source after its POST, or
// while it waits for the source to start.
type SourceState struct {
	ID string
	// Post is how the POST was answered, and PostError why it failed.
	Post      PostResult
	PostError string
	// Read: the source's agent answered the GET that followed; Journal
	// is its recovery journal then (nil: none).
	Read    bool
	Journal *Journal
	// Waited is how long recover has waited for the source to start, and
	// Limit how long it may.
	Waited, Limit time.Duration
	// Silent is how long the source's agent has not answered since it
	// took the request, and SilentLimit how long that may last before
	// recover stops following it.
	Silent, SilentLimit time.Duration
}

// SourceVerdict is what to do about the source.
type SourceVerdict int

const (
	// SourceWait: look again (after a pause).
	SourceWait SourceVerdict = iota
	// SourceStarted: the source forced (or restored) the new cluster:
	// wait for the others to rejoin it.
	SourceStarted
	// SourceCallOff: the source did not take the recovery, or refused it:
	// call the fences off, their old members run as before.
	SourceCallOff
	// SourceLeave: the source's state cannot be known, or it has not
	// started in time: the fences stay (each is reported as stale after
	// FenceStaleAfter) until the source starts or `recover --abort ID`.
	SourceLeave
	// SourceHandedOver: the source journaled the recovery, then its agent
	// stopped answering (killed, its host rebooted): it resumes from its
	// journal when it runs again; the fences stay for it.
	SourceHandedOver
)

// Decision is a verdict with its one-line reason.
type Decision[V any] struct {
	Verdict V
	Reason  string
}

// DecideSource says what the source's answer and journal mean. Only a
// source that is known not to go on has its fences called off: an
// answer that does not say is checked against its journal first.
func DecideSource(s SourceState) Decision[SourceVerdict] {
	j := s.Journal
	mine := j != nil && j.ID == s.ID && j.Role == RoleSource
	switch {
	case mine && j.Step == StepRefused:
		return Decision[SourceVerdict]{SourceCallOff, fmt.Sprintf("the source refused the recovery: %s", j.Error)}
	case mine && (j.Step == StepForced || j.Step == StepDone):
		return Decision[SourceVerdict]{SourceStarted, fmt.Sprintf("the source started the recovered cluster (step %s)", j.Step)}
	case s.Post == PostRefused && s.Read && !mine:
		return Decision[SourceVerdict]{SourceCallOff, fmt.Sprintf("the source did not take the recovery: %s", s.PostError)}
	case s.Post == PostAmbiguous && s.Read && !mine:
		return Decision[SourceVerdict]{SourceCallOff, fmt.Sprintf("the source's answer was lost (%s), and its journal, read again, has no recovery %s: it did not take it", s.PostError, s.ID)}
	case mine && !s.Read && s.Silent >= s.SilentLimit:
		return Decision[SourceVerdict]{SourceHandedOver, fmt.Sprintf("the source took the recovery (step %s), then its agent stopped answering: it resumes from its journal when it runs again; the fences stay for it", j.Step)}
	case !mine && !s.Read:
		return Decision[SourceVerdict]{SourceLeave, fmt.Sprintf("the source's answer was lost (%s) and its journal cannot be read: it may have taken the recovery, so the fences stay", orNone(s.PostError))}
	case s.Waited >= s.Limit:
		step := "unknown"
		if mine {
			step = string(j.Step)
		}
		return Decision[SourceVerdict]{SourceLeave, fmt.Sprintf("the source has not started after %s (step %s): the fences stay until it does or recover --abort %s", s.Limit, step, s.ID)}
	case mine:
		return Decision[SourceVerdict]{SourceWait, fmt.Sprintf("the source is at step %s", j.Step)}
	}
	return Decision[SourceVerdict]{SourceWait, "the source's journal does not show the recovery yet"}
}

func orNone(s string) string {
	if s == "" {
		return "no error"
	}
	return s
}

// AbortPlan is what `recover --abort ID` calls off.
type AbortPlan struct {
	Source string
	Fenced []string
}

// DecideAbort says which fences of recovery id to call off, or why none:
// never once the source has started (or may have: its agent cannot be
// reached, unless force says the operator knows it never will).
func DecideAbort(ins []Inspection, id string, force bool) (AbortPlan, error) {
	var p AbortPlan
	for _, i := range ins {
		j := i.Recovery
		if j == nil || j.ID != id {
			continue
		}
		if j.Role == RoleSource && j.Step != StepRefused {
			return p, fmt.Errorf("recovery %s has started on its source %s (step %s): it is not called off; let it finish", id, i.Name, j.Step)
		}
		p.Source = j.Source
		if j.Role == RoleFenced && j.Open() {
			p.Fenced = append(p.Fenced, i.Name)
		}
	}
	if len(p.Fenced) == 0 {
		return p, fmt.Errorf("no open fence of recovery %s on the agents reached", id)
	}
	src := slices.IndexFunc(ins, func(i Inspection) bool { return i.Name == p.Source })
	if (src < 0 || !ins[src].Reachable) && !force {
		return p, fmt.Errorf("the source %s of recovery %s cannot be reached: it may have started, and calling the fences off could start a second cluster next to it. "+
			"Make its agent reachable, or pass --force if you know it never will start", p.Source, id)
	}
	return p, nil
}

// DecideRecovered says whether the wait for every member to be a healthy
// voter is over: done, or given up after limit (the agents go on).
func DecideRecovered(healthy, voters, members int, waited, limit time.Duration) (done bool, err error) {
	switch {
	case healthy == members && voters == members:
		return true, nil
	case waited >= limit:
		return true, fmt.Errorf("not recovered after %s: %d of %d members are healthy voters; the agents go on: follow it with etcdkeeper status", limit, healthy, members)
	}
	return false, nil
}

// names joins member names for a message.
func joinNames(ns []string) string { return strings.Join(ns, ",") }

// Resume says whether recovery id (recover run again, or on the next
// host in turn, --id) may go on from src: its journals must name src.
// started: the source's agent has it already (it is not asked to start
// again, nor refused for the quorum it left).
func Resume(id, src string, ins []Inspection) (started bool, err error) {
	if err := (Request{ID: id, Role: RoleFenced, Source: src}).Check(); err != nil {
		return false, fmt.Errorf("--id: %w", err)
	}
	for _, i := range ins {
		j := i.Recovery
		if j == nil || j.ID != id {
			continue
		}
		if j.Source != src {
			return false, fmt.Errorf("recovery %s is from %s, not %s", id, j.Source, src)
		}
		if i.Name == src && j.Role == RoleSource {
			started = true
		}
	}
	return started, nil
}

// CheckStart is the refusal before a recovery starts: a quorum is
// healthy, another recovery is under way, the source's data is not
// usable. A recovery resumed (--id) on a host that cannot reach the
// source fences this host's side first: the source checks its own data
// when its turn comes.
func CheckStart(ins []Inspection, src string, q QuorumState, id string, fromSnapshot, resumed bool) error {
	if fromSnapshot || (resumed && !find(ins, src).Reachable) {
		return CheckFromSnapshot(ins, q, id)
	}
	return CheckFrom(ins, src, q, id)
}

// FencesDown is DecideFencesDown's answer: Down when every fenced member
// has stopped; else Ended names a fence that ended (the recovery must not
// go on), or Waiting the members still running.
type FencesDown struct {
	Down    bool
	Ended   string
	Waiting string
}

// DecideFencesDown: the source may be asked only once every fenced member
// reports its fence of recovery id open and its old etcd stopped. A fence
// that ended (its member found a leader, or a healthy quorum listing it)
// or an agent that took another recovery means the old cluster may still
// serve: the recovery must not go on. The order is the point.
func DecideFencesDown(fenced []Inspection, id string) FencesDown {
	var running []string
	for _, in := range fenced {
		switch j := in.Recovery; {
		case !in.Reachable:
			running = append(running, in.Name+" (not reached: "+in.Error+")")
		case j == nil || j.ID != id:
			return FencesDown{Ended: fmt.Sprintf("%s no longer holds the fence of recovery %s", in.Name, id)}
		case j.Step != StepFenced:
			return FencesDown{Ended: fmt.Sprintf("%s's fence of recovery %s ended (step %s): its old member has a leader or its cluster a quorum again", in.Name, id, j.Step)}
		case in.EtcdRunning:
			running = append(running, in.Name+" (its old member still runs: it stops once it has had no leader for a few seconds)")
		}
	}
	if len(running) > 0 {
		return FencesDown{Waiting: "not every fenced member has stopped: " + strings.Join(running, "; ")}
	}
	return FencesDown{Down: true}
}
