package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/statefile"
)

// Host turns (reconcile/turn.go): etcdkeeper guard and maintenance ask
// this agent through the control socket for their host's turn; the wish
// is kept in the state dir (turnFile), so that a restart of the agent in
// the turn (a package upgrade) keeps it; the loop takes, holds, renews
// and ends the turn in the cluster.

// turnFile keeps this host's wish (model.TurnWish).
const turnFile = "turn.json"

// turnSettle is how long after a guard's command returned its turn may
// end: a command that asked for a reboot (systemctl reboot) returns
// before the shutdown stops anything.
const turnSettle = 5 * time.Second

// turnRenewEvery is how often the holder's agent renews its turn, at
// its passes: spec.TurnRenewals of them fit in the timeout (the spec
// checks it against agent.interval).
func turnRenewEvery(timeout time.Duration) time.Duration {
	return min(30*time.Second, max(time.Second, timeout/spec.TurnRenewals))
}

// turnSight is when this agent first saw the cluster's turn key at its
// current revision, on its own clock: how long a turn has gone
// unrenewed is timed here, never by the holder's Renewed, which another
// host's wall clock wrote (minutes off, or stepped by NTP). Each renewal
// is a new revision. An agent restarted starts the count again: it
// releases later, never earlier.
type turnSight struct {
	rev int64
	at  time.Time
}

// unchangedFor is how long the key has stood at t's revision (nil t: no
// key) as of now, which comes from time.Now(): its monotonic reading is
// what the difference is taken on.
func (s *turnSight) unchangedFor(t *model.HostTurn, now time.Time) time.Duration {
	if t == nil {
		*s = turnSight{}
		return 0
	}
	if s.at.IsZero() || t.Revision != s.rev {
		*s = turnSight{rev: t.Revision, at: now}
	}
	return now.Sub(s.at)
}

// loadWish is the wish kept in the state dir (nil: none). One that does
// not parse is reported and left there: it may hold a turn.
func (a *Agent) loadWish() *model.TurnWish {
	var w model.TurnWish
	found, err := statefile.Load(a.statePath(turnFile), &w)
	if err != nil {
		a.lg.Error("the host turn's wish is not read: fix or remove it (etcdkeeper maintenance end)", zap.String("file", a.statePath(turnFile)), zap.Error(err))
		return nil
	}
	if !found {
		return nil
	}
	return &w
}

func (a *Agent) saveWish(w *model.TurnWish) error {
	if w == nil {
		return a.noteWrite(turnFile, statefile.Remove(a.statePath(turnFile)))
	}
	return a.noteWrite(turnFile, statefile.Save(a.statePath(turnFile), *w))
}

// observeTurn reads this host's wish and the cluster's turn for the
// decision, drops the wish of a guard that went away before its turn
// came, renews a turn this host holds, and reads the agents' records when
// the wish waits (the leader's host goes last).
func (a *Agent) observeTurn(ctx context.Context, in *reconcile.Input) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	s, _ := a.Spec()
	in.TurnTimeout = s.Maintenance.HostTurnTimeout.Duration
	w := a.loadWish()
	if w != nil && !w.Granted && w.Kind == model.TurnGuard && !guardAlive(w) {
		a.lg.Info("host turn no longer wished: the guard that asked is gone", zap.String("why", w.Why), zap.Int("pid", w.PID))
		if err := a.saveWish(nil); err == nil {
			w = nil
		}
	}
	in.Local.Turn = turnLocal(w, time.Now(), a.goneFor(w))
	if in.Cluster == nil {
		a.updateStatus(func(st *Status) { st.TurnWish = w })
		return
	}
	t, err := a.client.GetTurn(ctx, s.Cluster.Name)
	if err != nil {
		// Not known: the pass decides as without a view of the cluster,
		// so that no disruption is granted beside a turn it cannot see,
		// and no turn is ended on a guess.
		a.lg.Debug("reading the host turn: the pass goes without the cluster's view", zap.Error(err))
		in.Cluster = nil
		a.updateStatus(func(st *Status) { st.TurnWish = w })
		return
	}
	if w != nil && !w.Granted && t.Of(w, in.Self.Name) {
		// A take whose txn committed while its call failed (timed out):
		// the turn is this host's; renewed and ended as any other.
		w.Granted = true
		if err := a.saveWish(w); err != nil {
			a.lg.Error("keeping the host turn the cluster names as this host's", zap.Error(err))
		} else {
			a.metrics.HostTurns.WithLabelValues("taken").Inc()
			a.lg.Warn("host turn taken: the cluster names this host's wish, though taking it seemed to fail", zap.String("id", w.ID), zap.String("why", w.Why))
			in.Local.Turn = turnLocal(w, time.Now(), a.goneFor(w))
		}
	}
	seen := a.turnSight.unchangedFor(t, time.Now())
	// Renewed when due by this agent's clock since it last saw the key
	// change, or by the wall clock that wrote Renewed (this host's, and
	// what a restarted agent has to go on).
	if every := turnRenewEvery(in.TurnTimeout); t != nil && w != nil && w.Granted && t.ID == w.ID && (seen >= every || time.Since(t.Renewed) >= every) {
		n := *t
		n.Renewed = time.Now()
		if r, err := a.client.RenewTurn(ctx, s.Cluster.Name, n); err != nil {
			a.lg.Warn("renewing the host turn", zap.Error(err))
		} else {
			t = r
			seen = a.turnSight.unchangedFor(t, time.Now())
		}
	}
	if t != nil {
		t.Unchanged = seen
	}
	in.Cluster.Turn = t
	if w != nil && !w.Granted && in.Agents == nil {
		if recs, err := a.client.Agents(ctx, s.Cluster.Name); err == nil {
			in.Agents = recs
		}
	}
	a.metrics.SetHostTurn(t != nil && t.Member == in.Self.Name)
	a.updateStatus(func(st *Status) { st.Turn, st.TurnWish = t, w })
}

// turnLocal is what the decision reads of wish w; goneFor is how long
// this agent has seen w's guard gone in this boot.
func turnLocal(w *model.TurnWish, now time.Time, goneFor time.Duration) model.TurnLocal {
	if w == nil {
		return model.TurnLocal{}
	}
	tl := model.TurnLocal{Wish: w}
	switch {
	case w.Done:
		tl.Settled = now.Sub(w.DoneAt) >= turnSettle
	case w.Kind == model.TurnMaintenance:
		tl.Active = true
	case w.Boot != bootID():
		// The host rebooted: the command has run, as far as it will.
		tl.Settled = true
	case guardAlive(w):
		tl.Active = true
	default:
		// The guard is gone in this boot without saying it is done:
		// killed, or stopped early in a shutdown it asked for (user
		// sessions stop before the services): the turn may end only once
		// the shutdown would have stopped this agent.
		tl.Settled = goneFor >= guardGoneSettle
	}
	return tl
}

// guardGoneSettle is how long a guard that went away without saying its
// command is done holds the turn's end in the same boot: longer than a
// shutdown takes to stop this agent.
const guardGoneSettle = 60 * time.Second

// goneFor is how long this agent has seen the guard of wish w gone (0:
// it runs, or there is no guard).
func (a *Agent) goneFor(w *model.TurnWish) time.Duration {
	if w == nil || w.Kind != model.TurnGuard || w.Done || w.Boot != bootID() || guardAlive(w) {
		return 0
	}
	if a.turnGoneID != w.ID || hostStopping() {
		// While the host shuts down (or has a shutdown scheduled) the
		// clock does not run: a slow shutdown does not end the turn
		// before it stops this agent.
		a.turnGoneID, a.turnGoneAt = w.ID, time.Now()
	}
	return time.Since(a.turnGoneAt)
}

// hostStopping is HostStopping; a variable for the tests.
var hostStopping = HostStopping

// HostStopping: systemd takes the host down now, or has a shutdown
// scheduled (shutdown -r +5).
func HostStopping() bool {
	if _, err := os.Stat("/run/systemd/shutdown/scheduled"); err == nil {
		return true
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "systemctl", "is-system-running").Output()
	return strings.TrimSpace(string(out)) == "stopping"
}

// guardAlive: the guard process that made w still runs (the same
// process: its start time matches). Where /proc hides it (the packaged
// unit's ProtectProc=invisible hides root's guard from the agent, which
// runs as etcd; PIDStart then is 0), that a process of its PID exists
// in this boot.
func guardAlive(w *model.TurnWish) bool {
	if w.PID <= 0 || w.Boot != bootID() {
		return false
	}
	start, err := procStart(w.PID)
	switch {
	case err == nil:
		// PIDStart 0: the guard was hidden when it asked, so a process
		// this agent sees under its PID is another one.
		return w.PIDStart != 0 && start == w.PIDStart
	case errors.Is(err, fs.ErrNotExist):
		return w.PIDStart == 0 && procHidden(w.PID)
	}
	return false
}

// procHidden: /proc shows no process pid, but the kernel has one (it
// refuses a signal to it, rather than saying there is none): /proc
// hides other users' processes (hidepid, ProtectProc=invisible).
func procHidden(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// bootID is this boot's ID ("" when the kernel does not say).
// ETCDKEEPER_BOOT_ID stands for it: the packaged unit sets it to
// systemd's (%b), which in a container is the container's boot, where the
// agent's sandboxed /proc shows the kernel's; the integration tests play
// a host's reboot by restarting its agent with another.
func bootID() string {
	if id := os.Getenv("ETCDKEEPER_BOOT_ID"); id != "" {
		return id
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procDir is where procStart reads; a variable for the tests (a /proc
// that hides the guard).
var procDir = "/proc"

// procStart is process pid's start time, in clock ticks after boot
// (/proc/PID/stat field 22).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procDir, pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ErrTurnWished means another command's wish is there already.
var ErrTurnWished = errors.New("a host turn is already wished on this host")

// WishTurn keeps w as this host's wish (POST /turn) and wakes the loop. A
// wish already there is refused (ErrTurnWished) unless it is w's own ID
// (the command asks again after an agent restart), or it is the wish of
// a guard that is gone and has not been granted.
func (a *Agent) WishTurn(w model.TurnWish) (model.TurnProgress, error) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	if old := a.loadWish(); old != nil && old.ID != w.ID && (old.Granted || old.Kind != model.TurnGuard || guardAlive(old)) {
		return a.turnProgressLocked(old.ID), fmt.Errorf("%w: %s (%s, asked %s by %s): one turn at a time",
			ErrTurnWished, old.Why, old.Kind, old.At.Format(time.TimeOnly), old.By)
	} else if old != nil && old.ID == w.ID {
		return a.turnProgressLocked(old.ID), nil
	}
	if w.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		w.ID = hex.EncodeToString(b[:])
	}
	w.Boot, w.At, w.Granted, w.Done = bootID(), time.Now(), false, false
	if w.PID > 0 {
		start, err := procStart(w.PID)
		switch {
		case err == nil:
			w.PIDStart = start
		case errors.Is(err, fs.ErrNotExist) && procHidden(w.PID):
			// The guard is root's, and /proc hides it from this agent
			// (ProtectProc=invisible): it is known by its PID alone.
			w.PIDStart = 0
		default:
			return model.TurnProgress{}, fmt.Errorf("the guard's process %d: %w", w.PID, err)
		}
	}
	if err := a.saveWish(&w); err != nil {
		return model.TurnProgress{}, fmt.Errorf("keeping the wish for a host turn: %w", err)
	}
	a.lg.Info("host turn wished", zap.String("id", w.ID), zap.String("kind", string(w.Kind)), zap.String("why", w.Why), zap.String("by", w.By), zap.Bool("stop-etcd", w.StopEtcd))
	a.turnProgress = &model.TurnProgress{ID: w.ID, Phase: model.TurnWaiting, Text: "asked: the agent decides at its next pass"}
	a.Wake()
	return *a.turnProgress, nil
}

// ErrTurnGuarded means maintenance end was asked to end a turn (or
// withdraw a wish) of a guard that still runs.
var ErrTurnGuarded = errors.New("a running guard")

// TurnDone marks the work of wish id over (POST /turn/done): the
// command has run, or maintenance end (id ""). A wish not granted yet is
// withdrawn. maintenance end does not end a running guard's wish
// (ErrTurnGuarded) unless forced: the guard gives its turn back itself
// once its command has returned, and its command would go on outside the
// turn.
func (a *Agent) TurnDone(id string, force bool) (model.TurnProgress, error) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	w := a.loadWish()
	if w == nil || (id != "" && w.ID != id) {
		return a.turnProgressLocked(id), nil
	}
	if id == "" && w.Kind == model.TurnGuard && !w.Done && guardAlive(w) {
		if !force {
			return a.turnProgressLocked(w.ID), guardedErr(w)
		}
		a.lg.Warn("host turn's wish ended by force under a running guard: its command goes on outside the turn", zap.String("id", w.ID), zap.String("why", w.Why), zap.Int("pid", w.PID))
	}
	if !w.Granted {
		if err := a.saveWish(nil); err != nil {
			return model.TurnProgress{}, fmt.Errorf("withdrawing the wish for a host turn: %w", err)
		}
		a.lg.Info("host turn withdrawn before it came", zap.String("id", w.ID), zap.String("why", w.Why))
		a.turnEnded = &model.TurnProgress{ID: w.ID, Phase: model.TurnEnded, Text: "withdrawn before the turn came"}
		a.turnProgress = nil
		return *a.turnEnded, nil
	}
	if !w.Done {
		w.Done, w.DoneAt = true, time.Now()
		if err := a.saveWish(w); err != nil {
			return model.TurnProgress{}, fmt.Errorf("marking the host turn's work done: %w", err)
		}
		a.lg.Info("host turn's work done: the turn ends once the member is a caught-up voter again", zap.String("id", w.ID), zap.String("why", w.Why))
	}
	a.turnProgress = &model.TurnProgress{ID: w.ID, Phase: model.TurnReturning, Text: "the work is done: the turn ends once the member is a caught-up voter again"}
	a.Wake()
	return *a.turnProgress, nil
}

// guardedErr says which running guard holds (or waits for) the turn.
func guardedErr(w *model.TurnWish) error {
	verb := "waits for"
	if w.Granted {
		verb = "holds"
	}
	return fmt.Errorf("%w %s this host's turn: %s (pid %d, by %s, asked %s): it gives the turn back itself once its command has returned",
		ErrTurnGuarded, verb, w.Why, w.PID, w.By, w.At.Format(time.TimeOnly))
}

// TurnProgress is where wish id stands (GET /turn): "" asks for the
// wish there is.
func (a *Agent) TurnProgress(id string) model.TurnProgress {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	return a.turnProgressLocked(id)
}

func (a *Agent) turnProgressLocked(id string) model.TurnProgress {
	var p model.TurnProgress
	switch {
	case a.turnProgress != nil && (id == "" || a.turnProgress.ID == id):
		p = *a.turnProgress
	case a.turnEnded != nil && (id == "" || a.turnEnded.ID == id):
		p = *a.turnEnded
	default:
		// The agent restarted since the wish was made (a package upgrade
		// in the turn): the wish in the state dir says where it stands.
		w := a.loadWish()
		switch {
		case w != nil && (id == "" || w.ID == id):
			// Granted only once this process has read the cluster's key
			// naming it: a kill -9 between the wish's save and the
			// turn's txn leaves a wish that says granted without a turn.
			ph := wishPhase(w, turnLocal(w, time.Now(), 0).Active)
			if st := a.Status(); ph == model.TurnGranted && (st.Turn == nil || st.Turn.ID != w.ID) {
				ph = model.TurnWaiting
			}
			p = model.TurnProgress{ID: w.ID, Phase: ph, Text: "the agent decides at its next pass"}
		case id != "":
			p = model.TurnProgress{ID: id, Phase: model.TurnEnded, Text: "this host has no such wish: it ended, or was withdrawn"}
		default:
			p = model.TurnProgress{Phase: model.TurnEnded, Text: "no host turn is wished on this host"}
		}
	}
	st := a.Status()
	p.Turn, p.EtcdStopped = st.Turn, !a.etcd.Running()
	return p
}

// wishPhase is where wish w stands (active: its work runs).
func wishPhase(w *model.TurnWish, active bool) model.TurnPhase {
	switch {
	case !w.Granted:
		return model.TurnWaiting
	case active && !w.Done:
		return model.TurnGranted
	}
	return model.TurnReturning
}

// noteTurn keeps where the pass left this host's wish, for the command
// that follows it.
func (a *Agent) noteTurn(in reconcile.Input, act reconcile.Action, said string, err error) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	w := in.Local.Turn.Wish
	if act.Kind == reconcile.DoEndTurn && err == nil && w != nil {
		a.turnEnded = &model.TurnProgress{ID: w.ID, Phase: model.TurnEnded, Text: said}
		a.turnProgress = nil
		return
	}
	if w == nil {
		a.turnProgress = nil
		return
	}
	if cur := a.loadWish(); cur == nil || cur.ID != w.ID {
		return // withdrawn or replaced meanwhile
	} else {
		w = cur
	}
	text := said
	if err != nil {
		text += ": " + err.Error()
	}
	a.turnProgress = &model.TurnProgress{ID: w.ID, Text: text, Phase: wishPhase(w, in.Local.Turn.Active)}
}

// takeTurn writes this host's turn into the cluster (DoTakeTurn, under
// the cluster lock).
func (a *Agent) takeTurn(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	w := a.loadWish()
	if w == nil || w.ID != in.Local.Turn.Wish.ID {
		return "the wish for a host turn was withdrawn", true, nil
	}
	s, self := a.Spec()
	now := time.Now()
	t := model.HostTurn{ID: w.ID, Member: self.Name, MemberID: in.Local.Answer.MemberID, Kind: w.Kind, Why: w.Why, By: w.By,
		StopEtcd: w.StopEtcd, Since: now, Renewed: now, Boot: bootID()}
	// The wish first: a kill -9 between the two lines leaves a granted
	// wish whose turn the cluster does not hold, which the next pass ends
	// (ownTurn: the cluster no longer holds it); the other order would
	// leave a turn nobody here knows it holds, until its timeout.
	w.Granted = true
	if err := a.saveWish(w); err != nil {
		return "keeping the granted host turn", false, err
	}
	if _, err := a.client.TakeTurn(ctx, s.Cluster.Name, t); err != nil {
		w.Granted = false
		if serr := a.saveWish(w); serr != nil {
			a.lg.Error("the host turn was not taken, and the wish cannot say so: the next pass ends it", zap.Error(serr))
		}
		if errors.Is(err, cluster.ErrTurnTaken) {
			return "another host took the turn first", false, nil
		}
		return "taking the host turn", false, err
	}
	a.metrics.HostTurns.WithLabelValues("taken").Inc()
	a.remember(history.Event{Kind: "host-turn", Reason: act.Reason, Detail: map[string]string{"why": w.Why, "by": w.By, "id": w.ID}})
	a.lg.Info("host turn taken", zap.String("id", w.ID), zap.String("why", w.Why), zap.String("by", w.By))
	return act.Reason, true, nil
}

// stopForTurn stops etcd for the turn's work (guard --stop-etcd), its
// leadership handed to a caught-up voter first if it came back.
func (a *Agent) stopForTurn(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	a.handOffLeadership(ctx, in)
	a.lg.Info("stopping etcd for the host turn", zap.String("reason", act.Reason))
	e, err := a.etcd.Stop()
	if err != nil {
		return "stopping etcd for the host turn", false, err
	}
	a.noteExit(e.String(), e.Uptime, repair.Verdict{Class: repair.ClassNone, Reason: act.Reason}, true)
	return act.Reason, true, nil
}

// endTurn ends this host's turn (DoEndTurn): the cluster's key, if it
// still names the turn, then the wish.
func (a *Agent) endTurn(ctx context.Context, act reconcile.Action, in reconcile.Input) (string, bool, error) {
	a.turnMu.Lock()
	defer a.turnMu.Unlock()
	s, _ := a.Spec()
	if t := act.Turn; t != nil {
		if err := a.client.DeleteTurn(ctx, s.Cluster.Name, *t); err != nil && !errors.Is(err, cluster.ErrTurnTaken) {
			return "ending the host turn", false, err
		}
	}
	if err := a.saveWish(nil); err != nil {
		return "ending the host turn's wish", false, err
	}
	d := map[string]string{}
	if w := in.Local.Turn.Wish; w != nil {
		d["why"], d["id"], d["took"] = w.Why, w.ID, time.Since(w.At).Round(time.Second).String()
	}
	a.metrics.HostTurns.WithLabelValues("ended").Inc()
	a.metrics.SetHostTurn(false)
	a.remember(history.Event{Kind: "host-turn-end", Reason: act.Reason, Detail: d})
	a.lg.Info("host turn ended", zap.String("reason", act.Reason), zap.String("took", d["took"]))
	return act.Reason, true, nil
}

// releaseTurn releases another host's turn that its agent stopped
// renewing (DoReleaseTurn): loudly.
func (a *Agent) releaseTurn(ctx context.Context, act reconcile.Action, _ reconcile.Input) (string, bool, error) {
	s, _ := a.Spec()
	t := act.Turn
	if err := a.client.DeleteTurn(ctx, s.Cluster.Name, *t); err != nil {
		if errors.Is(err, cluster.ErrTurnTaken) {
			return "the host turn changed before its release (renewed, or ended)", false, nil
		}
		return "releasing an expired host turn", false, err
	}
	a.metrics.HostTurns.WithLabelValues("released").Inc()
	a.remember(history.Event{Kind: "host-turn-released", Member: t.Member, Reason: act.Reason,
		Detail: map[string]string{"why": t.Why, "id": t.ID, "renewed": t.Renewed.Format(time.RFC3339), "unchanged": t.Unchanged.Round(time.Second).String()}})
	a.lg.Error("host turn released: its host's agent stopped renewing it", zap.String("member", t.Member), zap.String("why", t.Why),
		zap.Time("renewed", t.Renewed), zap.Duration("unchanged", t.Unchanged), zap.String("reason", act.Reason))
	return act.Reason, true, nil
}

// handOffLeadership moves leadership off the local member, if it leads,
// to a caught-up voter of the spec, before its etcd stops (a stop for a
// host turn; the agent's own shutdown, as a plain systemctl reboot
// outside the guard brings): etcd's own transfer on SIGTERM picks the
// longest-connected peer, caught up or not, and waits on nothing. Bounded
// by handOffTimeout; nothing is done when the cluster does not answer.
func (a *Agent) handOffLeadership(ctx context.Context, in reconcile.Input) {
	if a.client == nil {
		return
	}
	s, self := a.Spec()
	ctx, cancel := context.WithTimeout(ctx, handOffTimeout)
	defer cancel()
	st, err := a.client.Status(ctx, self.ClientURLs[0])
	if err != nil || st.Leader == 0 || st.Leader != st.Header.MemberId {
		return
	}
	obs := in.Cluster
	if obs == nil || obs.LeaderID != st.Leader {
		c, err := a.client.Observe(ctx)
		if err != nil {
			a.lg.Warn("not handing leadership off before etcd stops: the cluster is not observed", zap.Error(err))
			return
		}
		obs = &c
	}
	step := reconcile.HandOff(s.Members, *obs, "etcd is about to stop")
	if step.Kind != reconcile.StepMoveLeader {
		a.lg.Warn("not handing leadership off before etcd stops", zap.String("reason", step.Reason))
		return
	}
	if err := a.client.MoveLeader(ctx, self.ClientURLs[0], step.To); err != nil {
		a.lg.Warn("handing leadership off before etcd stops", zap.Error(err))
		return
	}
	a.metrics.MembershipChanges.WithLabelValues("move-leader").Inc()
	a.noteLeaderMoved(ctx, step)
	a.lg.Info("handed leadership off before etcd stops", zap.String("to", fmt.Sprintf("%x", step.To)), zap.String("reason", step.Reason))
}

// handOffTimeout bounds handOffLeadership.
const handOffTimeout = 5 * time.Second

// TurnConflict: err refused a wish because another one is there, or
// the end of a running guard's turn.
func (a *Agent) TurnConflict(err error) bool {
	return errors.Is(err, ErrTurnWished) || errors.Is(err, ErrTurnGuarded)
}
