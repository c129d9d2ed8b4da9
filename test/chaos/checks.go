package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/test/testbed"
)

// etcdWrite is one put in etcd's history.
type etcdWrite struct {
	Key   string
	Value string
	Rev   int64
}

// etcdHistory reads what etcd holds at the end of the run under prefix:
// every put from revision 1 through a watch, or from the last compaction's
// revision when the NOSPACE procedure compacted (etcd no longer has the
// revisions before it: the recorder does), up to the last write, and the
// keys' current values; and the current revision.
func etcdHistory(endpoints []string, prefix string) (etcdEnd, int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return etcdEnd{}, 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The last write under the prefix is the newest of the keys' current
	// revisions: keys are only ever overwritten, never deleted.
	cur, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return etcdEnd{}, 0, fmt.Errorf("current values: %w", err)
	}
	end := etcdEnd{From: 1}
	var last int64
	for _, kv := range cur.Kvs {
		last = max(last, kv.ModRevision)
		end.Current = append(end.Current, etcdWrite{Key: string(kv.Key), Value: string(kv.Value), Rev: kv.ModRevision})
	}
	if last == 0 {
		return end, cur.Header.Revision, nil
	}
	for try := 0; try < 3; try++ {
		if end.From > last {
			return end, cur.Header.Revision, nil // compacted after the last write
		}
		wctx, wcancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(end.From))
		compacted := false
		for resp := range wch {
			if resp.CompactRevision > 0 {
				end.From, end.Tail, compacted = resp.CompactRevision, nil, true
				break
			}
			if err := resp.Err(); err != nil {
				wcancel()
				return etcdEnd{}, 0, fmt.Errorf("watch from revision %d: %w", end.From, err)
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					end.Tail = append(end.Tail, etcdWrite{Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Rev: ev.Kv.ModRevision})
				}
			}
			if len(end.Tail) > 0 && end.Tail[len(end.Tail)-1].Rev >= last {
				wcancel()
				return end, cur.Header.Revision, nil
			}
		}
		wcancel()
		if !compacted {
			break
		}
	}
	return etcdEnd{}, 0, fmt.Errorf("watch from revision %d ended before revision %d: %w", end.From, last, ctx.Err())
}

// resolveUnknown marks each write whose outcome the client never saw, or
// that was refused with NOSPACE, as "happened" or "never", by its unique
// value in etcd's history.
func resolveUnknown(ops []op, writes []etcdWrite) {
	seen := map[string]bool{}
	for _, w := range writes {
		seen[w.Key+"\x00"+w.Value] = true
	}
	for i := range ops {
		o := &ops[i]
		if !o.Unknown && !o.Refused || o.Kind == "get" {
			continue
		}
		if seen[o.Key+"\x00"+o.Value] {
			o.Resolved = "happened"
		} else {
			o.Resolved = "never"
		}
	}
}

// lostWrites lists the acknowledged writes that etcd's history lacks: a
// put or a successful cas the client was told succeeded at revision R
// must be in the history with its value at R.
func lostWrites(ops []op, writes []etcdWrite) []string {
	at := map[string]etcdWrite{}
	for _, w := range writes {
		at[w.Key+"\x00"+w.Value] = w
	}
	var lost []string
	for _, o := range ops {
		if o.Unknown || !o.OK || o.Kind == "get" {
			continue
		}
		w, ok := at[o.Key+"\x00"+o.Value]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s %s=%q acknowledged at revision %d is not in etcd's history", o.Kind, o.Key, o.Value, o.Rev))
		case w.Rev != o.Rev:
			lost = append(lost, fmt.Sprintf("%s %s=%q acknowledged at revision %d is in etcd's history at revision %d", o.Kind, o.Key, o.Value, o.Rev, w.Rev))
		}
	}
	return lost
}

// linearizable checks the history with porcupine; on failure it writes
// the checker's visualization next to the history.
func linearizable(ops []op, timeout time.Duration, htmlPath string) (porcupine.CheckResult, int) {
	hist := toPorcupine(ops)
	res, info := porcupine.CheckOperationsVerbose(kvModel, hist, timeout)
	if res != porcupine.Ok {
		_ = porcupine.VisualizePath(kvModel, info, htmlPath)
	}
	return res, len(hist)
}

// hashesAgree compares every member's KV hash at one revision: the
// repaired and re-added members must hold exactly the same data.
func hashesAgree(endpoints []string, rev int64) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	hashes := map[string]uint32{}
	var first uint32
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cli.HashKV(ctx, ep, rev)
		cancel()
		if err != nil {
			return fmt.Errorf("hash of %s at revision %d: %w", ep, rev, err)
		}
		hashes[ep] = resp.Hash
		if i == 0 {
			first = resp.Hash
		} else if resp.Hash != first {
			return fmt.Errorf("members disagree on the data at revision %d: %v", rev, hashes)
		}
	}
	return nil
}

// change is one membership change an agent logged.
type change struct {
	At      time.Time
	Agent   string
	Kind    string // remove, move-leader, update-peer-urls, rejoin-remove
	Target  string // member name, "" for a rejoin's own stale entry
	ID      uint64
	Healthy int // the agent's own count of healthy voters before, -1 if not logged
	Voters  int
}

// agentEvent is an action an agent logged on a member's etcd or
// membership that takes a member out of service: it stopped or restarted
// its own etcd, its etcd exited, it started a rejoin (repair or join) of
// its own member, or it removed a member.
type agentEvent struct {
	At     time.Time
	Agent  string
	Target string // the member acted on
	What   string
	Detail string
}

// agentLogs reads every agent's log: the membership changes, the
// actions that take a member out of service, and the lines that are not
// the agent's JSON log lines (a panic's stack, a truncated line). Every
// line must parse: a line skipped is a line no check looked at.
func agentLogs(logs map[string]string) (changes []change, events []agentEvent, bad []string, err error) {
	for agent, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for lineNo := 1; sc.Scan(); lineNo++ {
			line := sc.Text()
			var rec struct {
				TS       string `json:"ts"`
				Msg      string `json:"msg"`
				Kind     string `json:"kind"`
				Target   string `json:"target"`
				TargetID string `json:"target-id"`
				Healthy  *int   `json:"healthy-voters"`
				Voters   *int   `json:"voters"`
				Step     string `json:"step"`
				Removed  string `json:"removed"`
				MemberID string `json:"member-id"`
				Reason   string `json:"reason"`
				Exit     string `json:"exit"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				bad = append(bad, fmt.Sprintf("%s:%d: %v: %.200s", path, lineNo, err, line))
				continue
			}
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", rec.TS)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s:%d: time %q: %v: %.200s", path, lineNo, rec.TS, err, line))
				continue
			}
			ev := agentEvent{At: at, Agent: agent, Target: agent, Detail: rec.Reason}
			switch rec.Msg {
			case "stopping etcd":
				ev.What = "stopped its etcd"
			case "restarting etcd for a rollout":
				ev.What = "restarted its etcd for a rollout"
			case "etcd exited":
				ev.What, ev.Detail = "saw its etcd exit", rec.Exit+" "+rec.Reason
			case "rejoin started":
				ev.What = "started a rejoin (" + rec.Kind + ")"
			case "membership change":
				if rec.Kind == "remove" {
					ev.What, ev.Target = "removed", rec.Target
				}
			}
			if ev.What != "" {
				events = append(events, ev)
			}
			c := change{At: at, Agent: agent, Kind: rec.Kind, Target: rec.Target, Healthy: -1}
			switch {
			case rec.Msg == "membership change":
				c.ID, _ = strconv.ParseUint(rec.TargetID, 16, 64)
				if rec.Healthy != nil && rec.Voters != nil {
					c.Healthy, c.Voters = *rec.Healthy, *rec.Voters
				}
			case rec.Msg == "rejoin step" && rec.Step == "remove" && rec.Removed != "":
				c.Kind = "rejoin-remove"
				c.ID, _ = strconv.ParseUint(rec.Removed, 16, 64)
			case rec.Msg == "promoted to voter":
				c.Kind = "promote"
				c.ID, _ = strconv.ParseUint(rec.MemberID, 16, 64)
			default:
				continue
			}
			changes = append(changes, c)
		}
		f.Close()
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].At.Before(changes[j].At) })
	sort.Slice(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	return changes, events, bad, nil
}

// verdict is the quorum check of one removal.
type verdict struct {
	C       change
	Problem string // "" when safe
	Note    string
}

// quorumCheck checks every removal an agent made against the health the
// monitor observed right before it (and the agent's own logged counts):
// the healthy voters left after the removal must be a quorum of the voters
// left. A removal observed unsafe only because a fault hit in the moment
// between the monitor's sample and the change is reported, not failed.
func quorumCheck(changes []change, mon *monitor, faults []fault) []verdict {
	var out []verdict
	for _, c := range changes {
		if c.Kind != "remove" && c.Kind != "rejoin-remove" && c.Kind != "promote" {
			continue
		}
		v := verdict{C: c}
		if c.Kind == "promote" {
			v.Problem = promoteCheck(c, mon)
			out = append(out, v)
			continue
		}
		s, ok := mon.lastBefore(c.At)
		if !ok || c.At.Sub(s.End) > 3*time.Second {
			v.Note = "no observation within 3 s before the change"
			out = append(out, v)
			continue
		}
		target, listed := s.ByID(c.ID)
		healthy, voters := healthyVoters(s)
		if listed && !target.Learner {
			voters--
			if target.Healthy() {
				healthy--
			}
		}
		if healthy < voters/2+1 {
			v.Problem = fmt.Sprintf("observed %s before: after the %s of %s (%x) %d healthy of %d voters, below quorum %d",
				s.End.Format("15:04:05.000"), c.Kind, nameOr(target.Name, c.Target), c.ID, healthy, voters, voters/2+1)
			v.Note = dipExplained(s, c, faults)
		}
		if c.Healthy >= 0 {
			h, vv := c.Healthy, c.Voters
			if listed && !target.Learner {
				vv--
				if target.Healthy() {
					h--
				}
			}
			if h < vv/2+1 {
				v.Problem = strings.TrimPrefix(v.Problem+"; ", "; ") + fmt.Sprintf("the agent's own counts (%d healthy of %d voters) leave %d of %d", c.Healthy, c.Voters, h, vv)
				v.Note = ""
			}
		}
		out = append(out, v)
	}
	return out
}

// raceWindow is how long before a membership change an agent may have
// observed the cluster it decided on: two passes at the test bed's
// agent.interval of 500 ms (one to take the lock, one to decide under
// it), with room for a slow observation.
const raceWindow = 3 * time.Second

// dipExplained says which faults explain the dip in healthy voters that
// observation s shows before change c, "" when they do not all: each
// voter unhealthy in s (the member changed aside) must have been hit by a
// fault that began after the agent could have observed it healthy
// (within raceWindow before the change) and before s. Such a removal
// looked safe to the agent, and was, when it decided; a dip no fresh fault
// explains means the agent removed a member while it could have seen
// that too few were healthy.
func dipExplained(s testbed.Observation, c change, faults []fault) string {
	var why []string
	for _, m := range s.Voters() {
		if m.Healthy() || m.ID == c.ID {
			continue
		}
		found := ""
		for _, f := range faults {
			hit := f.Target == m.Name || slices.Contains(f.Cut, m.Name)
			if hit && !f.At.Before(c.At.Add(-raceWindow)) && f.At.Before(s.End) {
				found = fmt.Sprintf("%s of %s at %s", f.Kind, m.Name, f.At.Format("15:04:05.000"))
			}
		}
		if found == "" {
			return ""
		}
		why = append(why, found)
	}
	if len(why) == 0 {
		return ""
	}
	return "raced with fault " + strings.Join(why, " and ")
}

// promoteCheck: a learner promoted before it can vote adds a voter
// without adding a vote. The first observation after the promotion must
// still show a quorum of healthy voters.
func promoteCheck(c change, mon *monitor) string {
	s, ok := mon.firstAfter(c.At)
	if !ok {
		return ""
	}
	healthy, voters := healthyVoters(s)
	if healthy < voters/2+1 {
		return fmt.Sprintf("observed %s after: %d healthy of %d voters, below quorum %d", s.Start.Format("15:04:05.000"), healthy, voters, voters/2+1)
	}
	return ""
}

// healthyVoters counts the voters of an observation and the healthy ones
// among them, by the test bed's one health rule.
func healthyVoters(s testbed.Observation) (healthy, voters int) {
	for _, m := range s.Voters() {
		voters++
		if m.Healthy() {
			healthy++
		}
	}
	return healthy, voters
}

func nameOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
