package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/agent"
	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func guardCmd() *cobra.Command {
	var path, name string
	var stopEtcd bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "guard [--config FILE] [--stop-etcd] [--wait D] -- CMD [ARGS...]",
		Short: "Run a command that disrupts this host (a reboot, OS patching) in the host's turn: one host at a time",
		Long: `guard asks this host's agent (through its control socket) for the host's turn,
waits for it, printing why it waits, then runs CMD. The agents grant turns one
host at a time, through the same budget as their own restarts: only while no
other member is out of service and the others are caught-up voters that keep a
quorum without this one, the leader's host last, after the agent has handed
leadership to a caught-up voter. With --stop-etcd the agent stops etcd cleanly
before CMD runs.

The turn ends only once this host's member is a caught-up voter again: after
CMD returns (guard waits for it), or, when CMD reboots the host, after the
restarted agent has seen its member catch up. Until then no other host gets a
turn and no agent restarts or defragments any member, whatever
maintenance.maxDisrupted says.

An agent that does not answer (restarting, as a package upgrade inside the
turn restarts it) is asked again for up to 2 minutes.

SIGINT, SIGTERM and SIGHUP (those not ignored when guard started: nohup's
SIGHUP stays ignored) do not end guard while CMD runs: it passes them on to CMD
and waits for it, then gives the turn back as usual. Before CMD runs they
withdraw the wish; after it has returned they stop the wait for the turn's end
(the agent ends it once the member has caught up). CMD gets SIGKILL if guard
itself dies (kill -9, the OOM killer): it must not go on outside the turn.

Exit status: CMD's, once the turn is given back (128+N when CMD died of signal
N); 128+N when guard got signal N before CMD ran or while it waited for the
turn's end; 2 when the turn did not come within --wait; 1 when the agent cannot
be asked, or the turn could not be given back (the agent then ends it by itself
60 s after guard is gone, once the member has caught up); 127 when CMD could
not be started.`,
		Example: `  etcdkeeper guard -- systemctl reboot
  etcdkeeper guard --stop-etcd -- apt-get -y dist-upgrade`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := newTurnClient(c, path, name)
			if err != nil {
				return err
			}
			w := model.TurnWish{Kind: model.TurnGuard, Why: "guard: " + strings.Join(args, " "), By: whoAmI(), StopEtcd: stopEtcd, PID: os.Getpid(), ID: newWishID()}
			sig := catchSignals(c.Context())
			defer sig.stop()
			id, err := t.waitGranted(sig.ctx, w, wait)
			if err != nil {
				return err
			}
			rc := sig.run(c, args)
			if shuttingDown() {
				fmt.Fprintln(t.out, "etcdkeeper: the host is shutting down (or has a shutdown scheduled): the agent ends the turn once it is back and its member has caught up")
				// The shutdown ends this process (SIGTERM: the one CMD got
				// while it ran counts); if not, the agent holds the turn
				// while one is scheduled.
				sig.takePassed()
				select {
				case <-sig.ctx.Done():
					return t.interrupted(sig.ctx, "the agent ends the turn once the host is back and its member has caught up")
				case <-time.After(10 * time.Minute):
				}
				return &exitError{code: rc, err: errors.New("the host did not shut down")}
			}
			if err := t.returnTurn(sig.ctx, httpapi.TurnID{ID: id}); err != nil {
				return err
			}
			if rc != 0 {
				return &exitError{code: rc, err: fmt.Errorf("%s exited %d", args[0], rc)}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "this host's member (default: the host name)")
	c.Flags().BoolVar(&stopEtcd, "stop-etcd", false, "stop etcd cleanly before CMD runs (it starts again once CMD has returned)")
	c.Flags().DurationVar(&wait, "wait", 0, "give up (exit 2) when the turn has not come after this long (default: wait until it comes)")
	return c
}

func maintenanceCmd() *cobra.Command {
	var path, name, reason string
	var stopEtcd, noWait, force bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "maintenance start|end|status",
		Short: "Hold this host's turn for hand work (start), and give it back (end)",
		Long: `maintenance start takes this host's turn as guard does and returns once it is
held (with --stop-etcd, once etcd is stopped); the turn stays held, across
reboots of the host, until maintenance end. maintenance end gives it back: etcd
starts again if it was stopped, and the turn ends once the member is a caught-up
voter again (end waits for that unless --no-wait). status prints where this
host's turn stands.

maintenance end refuses (exit 2) while an etcdkeeper guard that still runs holds
the turn or waits for it, and names it: the guard gives the turn back itself
once its command has returned. --force ends it anyway; the guard's command then
goes on outside the turn.`,
		Example: `  etcdkeeper maintenance start --stop-etcd --reason "replacing the NIC"
  etcdkeeper maintenance end`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"start", "end", "status"},
		RunE: func(c *cobra.Command, args []string) error {
			t, err := newTurnClient(c, path, name)
			if err != nil {
				return err
			}
			switch args[0] {
			case "start":
				why := "maintenance"
				if reason != "" {
					why += ": " + reason
				}
				w := model.TurnWish{Kind: model.TurnMaintenance, Why: why, By: whoAmI(), StopEtcd: stopEtcd}
				sig := catchSignals(c.Context())
				defer sig.stop()
				if _, err := t.waitGranted(sig.ctx, w, wait); err != nil {
					return err
				}
				fmt.Fprintf(t.out, "etcdkeeper: %s holds the host turn: etcdkeeper maintenance end gives it back\n", t.self.Name)
				return nil
			case "end":
				done := httpapi.TurnID{Force: force}
				if noWait {
					p, err := t.post(c.Context(), "/turn/done", done)
					if err != nil {
						return t.endRefused(err)
					}
					fmt.Fprintf(t.out, "etcdkeeper: %s: %s\n", p.Phase, p.Text)
					return nil
				}
				sig := catchSignals(c.Context())
				defer sig.stop()
				return t.endRefused(t.returnTurn(sig.ctx, done))
			case "status":
				p, err := t.get(c.Context(), "")
				if err != nil {
					return err
				}
				fmt.Fprintf(t.out, "%s: %s: %s\n", t.self.Name, p.Phase, p.Text)
				if p.Turn != nil {
					fmt.Fprintf(t.out, "  the cluster's turn: %s\n", p.Turn.Text())
				}
				return nil
			}
			return fmt.Errorf("maintenance %s: say start, end or status", args[0])
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "this host's member (default: the host name)")
	c.Flags().StringVar(&reason, "reason", "", "start: why, shown in every agent's decision and the history")
	c.Flags().BoolVar(&stopEtcd, "stop-etcd", false, "start: stop etcd cleanly once the turn is held (it starts again at end)")
	c.Flags().DurationVar(&wait, "wait", 0, "start: give up (exit 2) when the turn has not come after this long")
	c.Flags().BoolVar(&noWait, "no-wait", false, "end: return at once, without waiting for the member to catch up")
	c.Flags().BoolVar(&force, "force", false, "end: end the turn even when a running etcdkeeper guard holds it (its command goes on outside the turn)")
	return c
}

// turnClient asks this host's agent for its turn, through its control
// socket.
type turnClient struct {
	ctl  *httpapi.Control
	self spec.Member
	out  io.Writer
	last string
}

func newTurnClient(c *cobra.Command, path, name string) (*turnClient, error) {
	s, err := loadSpec(c, path)
	if err != nil {
		return nil, err
	}
	ctl, err := httpapi.NewControl(s, name)
	if err != nil {
		return nil, err
	}
	self, listed := ctl.Self()
	if !listed {
		return nil, fmt.Errorf("%s names no member %q: run this on one of its hosts, or give --name", path, self.Name)
	}
	return &turnClient{ctl: ctl, self: self, out: c.OutOrStdout()}, nil
}

// waitGranted asks for the turn and follows it until it is held (and,
// with StopEtcd, etcd has stopped). Ctrl-C, SIGTERM or --wait running out
// withdraw the wish.
func (t *turnClient) waitGranted(ctx context.Context, w model.TurnWish, wait time.Duration) (string, error) {
	p, err := t.postAgain(ctx, "/turn", w)
	if ctx.Err() != nil {
		t.doneNow(w.ID)
		return "", t.interrupted(ctx, "the wish for a host turn is withdrawn")
	}
	if err != nil {
		return "", err
	}
	id := p.ID
	t.say(p)
	var deadline <-chan time.Time
	if wait > 0 {
		deadline = time.After(wait)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.Phase == model.TurnGranted && (!w.StopEtcd || p.EtcdStopped) {
			fmt.Fprintf(t.out, "etcdkeeper: host turn granted: %s\n", p.Text)
			return id, nil
		}
		if p.Phase == model.TurnEnded {
			return "", fmt.Errorf("the wish for a host turn ended before the turn came: %s", p.Text)
		}
		select {
		case <-ctx.Done():
			t.doneNow(id)
			return "", t.interrupted(ctx, "the wish for a host turn is withdrawn")
		case <-deadline:
			t.doneNow(id)
			fmt.Fprintf(t.out, "etcdkeeper: the host turn did not come within %s: withdrawn (last: %s)\n", wait, p.Text)
			return "", &exitError{code: 2, err: errors.New("the host turn did not come in time")}
		case <-tick.C:
		}
		if q, err := t.get(ctx, id); err != nil {
			t.sayText("the agent does not answer (" + err.Error() + "): asking again")
		} else {
			p = q
			t.say(p)
		}
	}
}

// returnTurn says the turn's work is done (done.ID's, or this host's
// wish for "") and follows the turn until it has ended (the member a
// caught-up voter again). A signal (ctx) stops the wait: the agent ends
// the turn by itself.
func (t *turnClient) returnTurn(ctx context.Context, done httpapi.TurnID) error {
	p, err := t.postAgain(ctx, "/turn/done", done)
	if ctx.Err() != nil {
		t.doneNow(done.ID)
		return t.interrupted(ctx, "the agent ends the turn once the member is a caught-up voter again")
	}
	if r, ok := errors.AsType[*refusal](err); ok && r.code == http.StatusConflict {
		return err
	}
	if err != nil {
		fmt.Fprintf(t.out, "etcdkeeper: the turn could not be given back: %v\n", err)
		return &exitError{code: 1, err: fmt.Errorf("giving the host turn back: %w", err)}
	}
	id := done.ID
	if id == "" {
		id = p.ID
	}
	for {
		t.say(p)
		if p.Phase == model.TurnEnded {
			return nil
		}
		select {
		case <-ctx.Done():
			return t.interrupted(ctx, "the agent ends the turn once the member is a caught-up voter again")
		case <-time.After(500 * time.Millisecond):
		}
		if q, err := t.get(ctx, id); err != nil {
			t.sayText("the agent does not answer (" + err.Error() + "): asking again")
		} else {
			p = q
		}
	}
}

// doneNow tells the agent once, whatever ctx the caller had, that wish id
// is over: withdrawn before its turn came, or its work done.
func (t *turnClient) doneNow(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := t.post(ctx, "/turn/done", httpapi.TurnID{ID: id}); err != nil {
		fmt.Fprintf(t.out, "etcdkeeper: telling the agent: %v (it drops the wish once this process is gone)\n", err)
	}
}

// interrupted is the exit of a command that a signal ended (128+N, as a
// shell says), after saying what becomes of the turn.
func (t *turnClient) interrupted(ctx context.Context, then string) error {
	code, got := 1, "interrupted"
	if s, ok := errors.AsType[*signalled](context.Cause(ctx)); ok {
		code, got = 128+int(s.sig), s.Error()
	}
	fmt.Fprintf(t.out, "etcdkeeper: %s: %s\n", got, then)
	return &exitError{code: code, err: fmt.Errorf("%s: %s", got, then)}
}

func (t *turnClient) say(p model.TurnProgress) { t.sayText(string(p.Phase) + ": " + p.Text) }

func (t *turnClient) sayText(s string) {
	if s != t.last {
		fmt.Fprintf(t.out, "etcdkeeper: %s\n", s)
		t.last = s
	}
}

// postAgainFor bounds how long postAgain asks an agent that does not
// answer: one restarting (a package upgrade in the turn) or busy with a
// slow pass.
const postAgainFor = 2 * time.Minute

// postAgain is post for the calls the agent takes more than once with
// the same effect (a wish with its ID, the work done): one the agent
// does not answer is made again until postAgainFor has passed; one it
// answers with a refusal is not.
func (t *turnClient) postAgain(ctx context.Context, path string, body any) (model.TurnProgress, error) {
	deadline := time.Now().Add(postAgainFor)
	for {
		p, err := t.post(ctx, path, body)
		var refused *refusal
		if err == nil || errors.As(err, &refused) || time.Now().After(deadline) || ctx.Err() != nil {
			return p, err
		}
		t.sayText("the agent does not answer (" + err.Error() + "): asking again")
		select {
		case <-ctx.Done():
			return p, err
		case <-time.After(time.Second):
		}
	}
}

// refusal is the agent's answer saying no (an HTTP status other than
// 200): code is the status, reason what the agent said.
type refusal struct {
	code        int
	msg, reason string
}

func (r *refusal) Error() string { return r.msg }

// endRefused says why the agent refused maintenance end (a running
// guard's turn: 409) and how to end it anyway, exit 2; other errors pass.
func (t *turnClient) endRefused(err error) error {
	r, ok := errors.AsType[*refusal](err)
	if !ok || r.code != http.StatusConflict {
		return err
	}
	fmt.Fprintf(t.out, "etcdkeeper: refused: %s\netcdkeeper: maintenance end --force ends it anyway (the guard's command then goes on outside the turn)\n", r.reason)
	return &exitError{code: 2, err: r}
}

func (t *turnClient) post(ctx context.Context, path string, body any) (model.TurnProgress, error) {
	if !t.ctl.Local(t.self) {
		return model.TurnProgress{}, fmt.Errorf("%s's agent has no control socket on this host: run this on %s", t.self.Name, t.self.Name)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return model.TurnProgress{}, err
	}
	resp, err := t.ctl.Post(ctx, t.self, path, b)
	if err != nil {
		return model.TurnProgress{}, err
	}
	return decodeTurn(resp, path)
}

func (t *turnClient) get(ctx context.Context, id string) (model.TurnProgress, error) {
	resp, err := t.ctl.Get(ctx, t.self, "/turn?id="+id)
	if err != nil {
		return model.TurnProgress{}, err
	}
	return decodeTurn(resp, "/turn")
}

func decodeTurn(resp *http.Response, path string) (model.TurnProgress, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return model.TurnProgress{}, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return model.TurnProgress{}, &refusal{code: resp.StatusCode, reason: e.Error, msg: fmt.Sprintf("%s: %s: %s", path, resp.Status, e.Error)}
	}
	var p model.TurnProgress
	if err := json.Unmarshal(b, &p); err != nil {
		return model.TurnProgress{}, fmt.Errorf("%s: the agent's answer does not parse (is it older than this command?): %w", path, err)
	}
	return p, nil
}

// shuttingDown: systemd is taking the host down (a reboot or poweroff
// CMD asked for returns before the shutdown stops anything). Looked at
// for two seconds: the job is queued when systemctl returns, but give it
// a moment.
func shuttingDown() bool {
	for range 4 {
		if agent.HostStopping() {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// printTurnLines says who holds the host turn and which hosts wait for
// one (nothing when neither).
func printTurnLines(ctx context.Context, w io.Writer, s *spec.Spec) {
	cli, err := dialSpec(s)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	if t, err := cli.GetTurn(ctx, s.Cluster.Name); err != nil {
		fmt.Fprintf(w, "host turn: not read: %v\n", err)
	} else if t != nil {
		// Renewed is the holder's clock, now this host's: a hint for
		// people; the agents time a release on their own clocks.
		age, stale := now.Sub(t.Renewed), ""
		if to := s.Maintenance.HostTurnTimeout.Duration; to > 0 && age > to {
			stale = fmt.Sprintf(" — not renewed for %s (maintenance.hostTurnTimeout %s): each agent releases it once it has seen it unchanged that long by its own clock", reconcile.Approx(age), to)
		}
		fmt.Fprintf(w, "host turn: %s, renewed %s ago%s\n", t.Text(), reconcile.Approx(age), stale)
	}
	recs, _ := cli.Agents(ctx, s.Cluster.Name)
	var waiting []string
	for _, r := range recs {
		if r.WantsTurn != "" {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", r.Name, r.WantsTurn))
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintf(w, "waiting for a host turn: %s\n", strings.Join(waiting, "; "))
	}
}

// newWishID names a wish on the guard's side, so that asking again (the
// agent did not answer) is the same wish, not a second one.
func newWishID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
