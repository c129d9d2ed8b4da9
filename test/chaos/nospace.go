package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The nospace fault: the nemesis fills the cluster with 512 KiB values
// under /nospace/ (which the clients' model never reads) until etcd
// refuses a put ("mvcc: database space exceeded": the chaos spec sets a
// small quota-backend-bytes, noSpaceQuota), then frees the space by
// deleting them (etcd takes deletes under NOSPACE). The agents must heal
// it by themselves, compaction on: compact, defragment every member,
// disarm, with every member keeping its ID. The fault acts from the first
// filler put until an observation begun after the delete lists no alarm;
// the summary gives, per fault, fill → refused, refused → alarm seen,
// free → the clients' first accepted write (and the agent's disarm line),
// free → no alarm seen.
//
// It acts alone: it is injected only while no other fault acts, every
// spec member is a healthy voter and the history recorder has read every
// write (so the compaction cannot take a revision it has not read), and
// no other fault is injected until it has healed.
const (
	noSpacePrefix    = "/nospace/"
	noSpaceValueSize = 512 << 10
	// noSpaceFillBound: a fill that reaches no NOSPACE by then is a heal
	// error (the quota is not what the spec says?).
	noSpaceFillBound = 2 * time.Minute
	// noSpaceHealBound: the agents must disarm within this after the free.
	noSpaceHealBound = 2 * time.Minute
)

// noSpaceQuota is the chaos spec's quota-backend-bytes when the nospace
// fault is enabled: 32 MiB above what the big data takes (and a quarter
// more), so that the fill is short and the big data alone never fills it.
func noSpaceQuota(bigMB int) int64 {
	return int64(32+bigMB+bigMB/4) << 20
}

type noSpace struct {
	cli    *clientv3.Client // the nemesis's client of all members
	rec    *recorder
	fault  int // the fault acting, -1 when none
	cancel context.CancelFunc
	wg     sync.WaitGroup
	filled atomic.Int64 // bytes put
	// refusedAt: unix nanos of the first put refused with NOSPACE.
	refusedAt atomic.Int64
	fillErr   atomic.Value      // string: the last other error of a filler
	ids       map[string]uint64 // the spec members' IDs when the fill began
	alarmAt   time.Time         // the first observation listing NOSPACE
	freedAt   time.Time         // the delete done
	freed     int64             // keys deleted
	nextFree  time.Time
	runs      []noSpaceRun
}

// noSpaceRun is one nospace fault's timeline, for the summary.
type noSpaceRun struct {
	start, refused, alarm, freed, disarmed time.Time
	bytes                                  int64
	keys                                   int64
	// before, after: the member IDs when the fill began and when no
	// alarm was seen.
	before, after map[string]uint64
	// cut: the run's heal came first (the final checks wait for no alarm).
	cut bool
}

func newNoSpace(rec *recorder) *noSpace { return &noSpace{rec: rec, fault: -1} }

func (s *noSpace) acting() bool { return s != nil && s.fault >= 0 }

// noSpaceFill injects the nospace fault: it starts the fill.
func (n *nemesis) noSpaceFill() string {
	s := n.nospace
	if s == nil {
		return "nospace disabled"
	}
	if why := n.quiet(); why != "" {
		return why
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	why := s.rec.caughtUp(ctx)
	cancel()
	if why != "" {
		return why
	}
	if s.cli == nil {
		s.cli = n.c.Client()
	}
	obs, _ := n.mon.latest() // quiet: fresh, the spec's healthy voters
	s.ids = map[string]uint64{}
	for _, name := range n.spec {
		s.ids[name] = obs.ID(name)
	}
	ctx, cancel = context.WithTimeout(context.Background(), noSpaceFillBound)
	s.cancel = cancel
	s.filled.Store(0)
	s.refusedAt.Store(0)
	s.fillErr = atomic.Value{}
	s.alarmAt, s.freedAt, s.freed, s.nextFree = time.Time{}, time.Time{}, 0, time.Time{}
	s.fault = n.record(fault{Kind: "nospace", Target: strings.Join(n.spec, ","), At: time.Now(),
		Detail: fmt.Sprintf("%d KiB values under %s until etcd refuses a put, then deleted", noSpaceValueSize>>10, noSpacePrefix)})
	seq := atomic.Int64{}
	for w := 0; w < 4; w++ {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			val := strings.Repeat("n", noSpaceValueSize)
			for ctx.Err() == nil {
				i := seq.Add(1)
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := s.cli.Put(pctx, fmt.Sprintf("%sk%06d", noSpacePrefix, i), val)
				pcancel()
				switch {
				case err == nil:
					s.filled.Add(noSpaceValueSize)
				case errors.Is(err, rpctypes.ErrNoSpace):
					s.refusedAt.CompareAndSwap(0, time.Now().UnixNano())
					cancel()
					return
				default:
					s.fillErr.Store(err.Error())
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	return ""
}

// quiet is "" when no other fault acts and every spec member is a
// healthy voter.
func (n *nemesis) quiet() string {
	switch {
	case len(n.active) > 0:
		return fmt.Sprintf("%d members not recovered from a fault", len(n.active))
	case len(n.lasting) > 0 || len(n.deliveries) > 0:
		return "a fault still acts"
	case len(n.joining) > 0 || len(n.startAt) > 0:
		return "a member is joining or starting"
	case n.big != nil && n.big.fault >= 0 && (n.big.doneAt.IsZero() || n.big.repair < 0):
		return "the big data is loading or its repair has not begun"
	}
	obs, ok := n.mon.latest()
	if !ok || obs.Err != nil || time.Since(obs.End) > 2*time.Second {
		return "no fresh observation of the cluster"
	}
	if _, why := obs.ExactVoters(n.spec...); why != "" {
		return "the cluster is not the spec's healthy voters: " + why
	}

	if len(obs.Alarms) > 0 {
		return fmt.Sprintf("alarms raised: %v", obs.Alarms)
	}
	return ""
}

// tendNoSpace, on every pass of the nemesis: once the fill is refused,
// notes the alarm, frees the space, and ends the fault when an
// observation begun after the free lists no alarm.
func (n *nemesis) tendNoSpace() {
	s := n.nospace
	if !s.acting() {
		return
	}
	f := &n.Faults[s.fault]
	obs, ok := n.mon.latest()
	if ok && obs.Err == nil && s.alarmAt.IsZero() && obs.Start.After(f.At) && hasNoSpace(obs.Alarms) {
		s.alarmAt = obs.Start
	}
	refused := s.refusedAt.Load()
	if refused == 0 {
		if time.Since(f.At) > noSpaceFillBound {
			s.cancel()
			s.wg.Wait()
			e, _ := s.fillErr.Load().(string)
			n.healErrors = append(n.healErrors, fmt.Sprintf("nospace: %d MiB put in %s and no put refused (last error: %s)", s.filled.Load()>>20, noSpaceFillBound, e))
			n.noSpaceFree(true)
			n.noSpaceEnd(time.Time{})
		}
		return
	}
	if s.freedAt.IsZero() {
		s.wg.Wait() // the fillers stop at the first refusal
		n.noSpaceFree(false)
		return
	}
	if ok && obs.Err == nil && obs.Start.After(s.freedAt) && len(obs.Alarms) == 0 {
		after := map[string]uint64{}
		for name := range s.ids {
			after[name] = obs.ID(name)
		}
		n.noSpaceEnd(obs.Start)
		s.runs[len(s.runs)-1].after = after
		return
	}
	if time.Since(s.freedAt) > noSpaceHealBound {
		n.healErrors = append(n.healErrors, fmt.Sprintf("nospace: alarms still raised %s after the free: %v", noSpaceHealBound, obs.Alarms))
		n.noSpaceEnd(time.Time{})
	}
}

// noSpaceFree deletes the filler keys (retried on the next pass when it
// fails; at once and bounded when now).
func (n *nemesis) noSpaceFree(now bool) {
	s := n.nospace
	for try := 0; ; try++ {
		if !now && time.Now().Before(s.nextFree) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := s.cli.Delete(ctx, noSpacePrefix, clientv3.WithPrefix())
		cancel()
		if err == nil {
			s.freedAt, s.freed = time.Now(), resp.Deleted
			refused := "no put refused"
			if r := s.refusedAt.Load(); r != 0 {
				refused = "refused at +" + time.Unix(0, r).Sub(n.Faults[s.fault].At).Round(100*time.Millisecond).String()
			}
			n.logf("nemesis: nospace: %d MiB put, %s; deleted %d keys at revision %d", s.filled.Load()>>20, refused, resp.Deleted, resp.Header.Revision)
			return
		}
		n.logf("nemesis: nospace: deleting the filler keys: %v", err)
		if !now || try == 5 {
			s.nextFree = time.Now().Add(time.Second)
			return
		}
		time.Sleep(time.Second)
	}
}

// noSpaceEnd ends the fault acting (disarmed zero: not healed).
func (n *nemesis) noSpaceEnd(disarmed time.Time) {
	s := n.nospace
	f := &n.Faults[s.fault]
	run := noSpaceRun{start: f.At, alarm: s.alarmAt, freed: s.freedAt, disarmed: disarmed, bytes: s.filled.Load(), keys: s.freed, before: s.ids}
	if r := s.refusedAt.Load(); r != 0 {
		run.refused = time.Unix(0, r)
	}
	s.runs = append(s.runs, run)
	f.Detail += fmt.Sprintf("; %d MiB put, %d keys deleted", run.bytes>>20, run.keys)
	if !disarmed.IsZero() {
		f.Recovered = disarmed
		n.event("recovered", *f)
	}
	n.ended(s.fault)
	s.fault = -1
}

// stopNoSpace, at the heal: a fault still acting is freed and left to the
// agents (the final checks wait for no alarm).
func (n *nemesis) stopNoSpace() {
	s := n.nospace
	if !s.acting() {
		return
	}
	s.cancel()
	s.wg.Wait()
	if s.freedAt.IsZero() {
		n.noSpaceFree(true)
	}
	n.noSpaceEnd(time.Time{})
	s.runs[len(s.runs)-1].cut = true
}

func hasNoSpace(alarms []*pb.AlarmMember) bool {
	for _, a := range alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// noSpaceSummary: each nospace fault's timeline ("" when there was none).
// disarms are when the agents logged their disarm; the first accepted
// write is the clients' first put or cas begun after the refusal and
// acknowledged (opsStart is the clients' time 0).
func (n *nemesis) noSpaceSummary(ops []op, opsStart time.Time, disarms []time.Time) string {
	s := n.nospace
	if s == nil || len(s.runs) == 0 {
		return ""
	}
	since := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "—"
		}
		return b.Sub(a).Round(10 * time.Millisecond).String()
	}
	var parts []string
	for _, r := range s.runs {
		if r.cut {
			parts = append(parts, fmt.Sprintf("%d MiB put, cut short by the run's heal", r.bytes>>20))
			continue
		}
		disarm, write := r.disarm(disarms), r.firstWrite(ops, opsStart)
		parts = append(parts, fmt.Sprintf("%d MiB put in %s until refused, alarm seen %s after; free → first accepted client write %s (the agent's disarm line, logged after its check put: %s after the free), free → no alarm seen %s",
			r.bytes>>20, since(r.start, r.refused), since(r.refused, r.alarm), since(r.freed, write), since(r.freed, disarm), since(r.freed, r.disarmed)))
	}
	refused, happened := 0, 0
	for _, o := range ops {
		if o.Refused {
			refused++
			if o.Resolved == "happened" {
				happened++
			}
		}
	}
	return fmt.Sprintf("nospace: %d faults (quota %d MiB); client writes refused with NOSPACE: %d, of which %d happened all the same (the write that crossed the quota at apply); %s",
		len(s.runs), n.nospaceQuota>>20, refused, happened, strings.Join(parts, "; "))
}

// disarm is the first disarm the agents logged after the refusal.
func (r noSpaceRun) disarm(disarms []time.Time) time.Time {
	var at time.Time
	for _, d := range disarms {
		if !r.refused.IsZero() && d.After(r.refused) && (at.IsZero() || d.Before(at)) {
			at = d
		}
	}
	return at
}

// firstWrite is when the clients' first put or cas begun after the
// refusal was acknowledged (zero: none was).
func (r noSpaceRun) firstWrite(ops []op, opsStart time.Time) time.Time {
	var at time.Time
	for _, o := range ops {
		call, ret := opsStart.Add(time.Duration(o.Call)), opsStart.Add(time.Duration(o.Return))
		if o.Kind != "get" && o.OK && !r.refused.IsZero() && call.After(r.refused) && (at.IsZero() || ret.Before(at)) {
			at = ret
		}
	}
	return at
}

// checkNoSpace: after each nospace fault no alarm was left (an
// observation begun after the free), every spec member kept its ID, the
// cluster took the clients' writes again, and the agents compacted
// (the procedure runs with compaction on).
func (ch *chaos) checkNoSpace() {
	s := ch.nem.nospace
	if s == nil || len(s.runs) == 0 {
		return
	}
	cut := 0
	for i, r := range s.runs {
		switch {
		case r.cut:
			cut++
			continue
		case r.refused.IsZero():
			ch.fail("nospace fault %d: no put was refused (%d MiB put)", i+1, r.bytes>>20)
			continue
		case r.disarmed.IsZero():
			ch.fail("nospace fault %d: the alarm was not disarmed within %s of the free (or before the heal)", i+1, noSpaceHealBound)
			continue
		case r.firstWrite(ch.ops, ch.opsStart).IsZero():
			ch.fail("nospace fault %d: no client write accepted after it", i+1)
		}
		for name, id := range r.before {
			if r.after[name] != id {
				ch.fail("nospace fault %d: member %s had ID %x when the fill began and %x once the alarm was gone", i+1, name, id, r.after[name])
			}
		}
	}
	if cut == len(s.runs) {
		ch.notes = append(ch.notes, fmt.Sprintf("nospace: the %d faults were cut short by the heal (the final check waited for no alarm)", cut))
		return
	}
	compactions := 0
	for _, m := range ch.c.Members {
		b, _ := os.ReadFile(ch.c.LogPath(m.Name))
		compactions += strings.Count(string(b), `"msg":"NOSPACE: compacted"`)
	}
	if compactions == 0 {
		ch.fail("nospace: %d faults, but no agent logged \"NOSPACE: compacted\": the procedure should compact (did the log line change?)", len(s.runs))
		return
	}
	ch.facts = append(ch.facts, fmt.Sprintf("nospace: after each of the %d faults no alarm was left, every member kept its ID and the clients' writes were accepted again (%d more cut short by the heal); the agents compacted %d times", len(s.runs)-cut, cut, compactions))
}
