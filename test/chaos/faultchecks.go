package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The checks that hold the agents to what they may do while faults act
// (docs/benchmarks.md, "The chaos run").

// checkAnswered fails the run when too few of the operations begun while
// a fault acted got an answer (-min-answered): the nemesis never takes
// more than a minority down, so the cluster must keep serving, and a run
// whose clients were stuck proves little about the agents' safety under
// load.
func (ch *chaos) checkAnswered() {
	var windows [][2]time.Time
	for _, f := range ch.nem.Faults {
		windows = append(windows, [2]time.Time{f.At, f.over(ch.healedAt)})
	}
	total, answered := 0, 0
	for _, o := range ch.ops {
		call := ch.opsStart.Add(time.Duration(o.Call))
		in := false
		for _, w := range windows {
			in = in || (!call.Before(w[0]) && call.Before(w[1]))
		}
		if !in {
			continue
		}
		total++
		if !o.Unknown {
			answered++
		}
	}
	switch {
	case len(windows) == 0:
	case total == 0:
		ch.fail("no operation was begun while a fault acted")
	case float64(answered) < ch.cfg.minAnswered*float64(total):
		ch.fail("only %d of the %d operations begun while a fault acted got an answer (%.0f%%, -min-answered %.0f%%)",
			answered, total, 100*float64(answered)/float64(total), 100*ch.cfg.minAnswered)
	default:
		ch.facts = append(ch.facts, fmt.Sprintf("%d of the %d operations begun while a fault acted got an answer (%.0f%%)",
			answered, total, 100*float64(answered)/float64(total)))
	}
}

// outOfServiceGrace: after a partition or a slow link or host is healed,
// the agents may still act on what they saw during it for a little while.
const outOfServiceGrace = 5 * time.Second

// checkOutOfService: while a partition, a slow link or a slow host acts
// (and outOfServiceGrace after), no agent may stop, restart or rejoin its
// etcd, see it exit, or remove a member, when that member was a healthy
// voter in the monitor's last observation (within 2 s before), is not the
// fault's own target, no other fault hit it since, and the spec intended
// at the time lists it. A member the majority can reach and which serves
// must not be taken out of service because another one is cut off or
// slow.
func (ch *chaos) checkOutOfService(events []agentEvent, mon *monitor) {
	faults := ch.nem.Faults
	checked := 0
	for _, f := range faults {
		if f.Kind != "partition" && f.Kind != "slow-link" && f.Kind != "slow-host" {
			continue
		}
		from, to := f.At, f.over(ch.healedAt).Add(outOfServiceGrace)
		if !f.End.IsZero() {
			to = f.End.Add(outOfServiceGrace)
		}
		for _, e := range events {
			if e.At.Before(from) || e.At.After(to) || e.Target == f.Target || slices.Contains(f.Cut, e.Target) {
				continue
			}
			checked++
			s, ok := mon.lastBefore(e.At)
			if !ok || e.At.Sub(s.End) > 2*time.Second || !s.HealthyVoter(e.Target) {
				continue
			}
			if hit := hitBetween(faults, e.Target, s.Start.Add(-time.Second), e.At); hit != "" {
				continue
			}
			if !slices.Contains(ch.specAt(e.At), e.Target) {
				continue // a planned change: the spec dropped it
			}
			ch.fail("during %s of %s (%s, %s to %s): agent %s %s %s at %s (%s), which was a healthy voter at %s and hit by no fault",
				f.Kind, f.Target, f.Detail, f.At.Format("15:04:05.000"), to.Add(-outOfServiceGrace).Format("15:04:05.000"),
				e.Agent, e.What, e.Target, e.At.Format("15:04:05.000"), e.Detail, s.End.Format("15:04:05.000"))
		}
	}
	ch.facts = append(ch.facts, fmt.Sprintf("out of service: during partitions and slow links and hosts, none of the %d agent actions that stop, restart, rejoin or remove a member hit a healthy voter the fault did not target", checked))
}

// hitBetween names a fault that hit member in [from, to] or still acted
// on it then, "" when none did.
func hitBetween(faults []fault, member string, from, to time.Time) string {
	for _, f := range faults {
		if f.Target != member && !slices.Contains(f.Cut, member) {
			continue
		}
		if !f.At.After(to) && (f.Recovered.IsZero() && f.End.IsZero() || !f.over(to).Before(from)) {
			return fmt.Sprintf("%s at %s", f.Kind, f.At.Format("15:04:05.000"))
		}
	}
	return ""
}

// specAt is the spec the nemesis intended at t: the last edit's, or the
// initial one.
func (ch *chaos) specAt(t time.Time) []string {
	spec := ch.nem.initial
	for _, f := range ch.nem.Faults {
		if f.Spec != nil && !f.At.After(t) {
			spec = f.Spec
		}
	}
	return spec
}

// checkIDs: a member keeps its member ID through every fault except a
// corrupt WAL (repaired under a new ID) and a spec edit that removes and
// re-adds it; a member whose first ID never became a healthy voter (a
// join interrupted and begun again) may get another. Any other new ID
// means an agent removed and re-added a member it should have left alone
// (after a partition, a kill, a slow link).
func (ch *chaos) checkIDs(mon *monitor) {
	type seen struct {
		id      uint64
		since   time.Time
		healthy bool
	}
	last := map[string]*seen{}
	changes, unexplained := 0, 0
	for _, s := range mon.samples() {
		if s.Err != nil {
			continue
		}
		for _, m := range s.Members {
			if m.Name == "" {
				continue
			}
			prev := last[m.Name]
			if prev == nil {
				last[m.Name] = &seen{id: m.ID, since: s.Start, healthy: m.HealthyVoter()}
				continue
			}
			if prev.id == m.ID {
				prev.healthy = prev.healthy || m.HealthyVoter()
				continue
			}
			changes++
			if why := ch.idChangeExplained(m.Name, prev.since, s.End, prev.healthy); why == "" {
				unexplained++
				var during []string
				for _, f := range ch.nem.Faults {
					if f.At.Before(s.End) && f.over(ch.healedAt).After(prev.since) {
						during = append(during, fmt.Sprintf("%s %s at %s", f.Kind, f.Target, f.At.Format("15:04:05.000")))
					}
				}
				ch.fail("member %s changed its ID from %x (seen since %s, a healthy voter) to %x (seen %s) without a corrupt WAL or a spec edit that removed it; faults meanwhile: %s",
					m.Name, prev.id, prev.since.Format("15:04:05.000"), m.ID, s.Start.Format("15:04:05.000"), strings.Join(during, "; "))
			}
			last[m.Name] = &seen{id: m.ID, since: s.Start, healthy: m.HealthyVoter()}
		}
	}
	if unexplained == 0 {
		ch.facts = append(ch.facts, fmt.Sprintf("member IDs: each of the %d ID changes is a repair of a corrupt WAL, a spec edit or a join begun again; every other member kept its ID", changes))
	}
}

// idChangeExplained says what explains member name's new ID, seen at
// `to` after the old one seen since `from`; "" when nothing does.
func (ch *chaos) idChangeExplained(name string, from, to time.Time, wasHealthy bool) string {
	if !wasHealthy {
		return "its old ID never became a healthy voter"
	}
	for _, f := range ch.nem.Faults {
		if f.At.Before(from.Add(-time.Second)) || f.At.After(to) {
			continue
		}
		switch {
		case f.Kind == "corrupt-wal" && f.Target == name:
			return "repair of a corrupt WAL"
		case f.Kind == "alarm-corrupt" && f.Target == name:
			return "repair after a CORRUPT alarm"
		case f.Spec != nil && (!slices.Contains(f.Spec, name) || !slices.Contains(f.Prev, name)):
			return "spec edit"
		}
	}
	return ""
}
