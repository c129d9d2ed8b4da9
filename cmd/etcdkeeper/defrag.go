package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func defragCmd() *cobra.Command {
	var path, member string
	var yes bool
	var timeout time.Duration
	c := &cobra.Command{
		Use: "defrag --config FILE [--member NAME] [--yes]",
		Example: `  # what would be defragmented now, and why (changes nothing)
  etcdkeeper defrag --config /etc/etcdkeeper/cluster.yaml

  # defragment every member that is due, one at a time, the leader last
  etcdkeeper defrag --config /etc/etcdkeeper/cluster.yaml --yes

  # one member, whatever its free share
  etcdkeeper defrag --config /etc/etcdkeeper/cluster.yaml --member node2 --yes`,
		Short: "Defragment the members now, one at a time, the leader last (a dry run without --yes)",
		Long: `defrag runs the agents' defragmentation now: one member at a time, followers
first, the leader last after its leadership moved to a caught-up voter. It
ignores maintenance.defrag.enabled and window; the thresholds (minFreeRatio,
minFreeBytes) apply unless --member names the one member to defragment.
Every safety rule stays: no membership change pending, no member down or
joining, no alarm but NOSPACE, the member caught up, and the other caught-up
voters a quorum; an operator's pause holds it.

With --yes it writes a request into the cluster that the agents' own loop
carries out, one step at a time under the cluster lock and every rule
(as etcdkeeper pause is carried out), follows their progress and exits with
the outcome. The request is bound to this command: interrupted (Ctrl-C),
it is withdrawn. Without --yes it prints the next step and changes nothing.
Exit status: 0 when done or nothing is due, 2 for a dry run with a step due
or a step that waits (a pause, another request, a member catching up, the
cluster lock taken), 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, cli, err := openSpec(path, member, "--member")
			if err != nil {
				return err
			}
			defer cli.Close()
			if yes {
				return runRequest(c.Context(), c.OutOrStdout(), s, cli, model.Request{Kind: model.RequestDefrag, Member: member}, timeout)
			}
			pol := reconcile.DefragPolicyOf(s.Maintenance.Defrag)
			pol.Member = member
			decide := func(obs model.Cluster) reconcile.Step {
				recs, _ := cli.Agents(c.Context(), s.Cluster.Name) // unread: the online way
				return reconcile.DefragCommand(s.Members, obs, recs, pol, s.Agent.LearnerTimeout.Duration)
			}
			return printNext(c.Context(), c.OutOrStdout(), s, cli, "--yes acts", decide)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&member, "member", "", "defragment this member only, whatever its free space")
	c.Flags().BoolVar(&yes, "yes", false, "act; without it, print the next step only")
	c.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up (and withdraw the request) after this long")
	return c
}

func leaderCmd() *cobra.Command {
	c := &cobra.Command{Use: "leader", Short: "Leadership: move it to another member",
		Example: `  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2`}
	var path, to string
	var dryRun bool
	var timeout time.Duration
	move := &cobra.Command{
		Use: "move --config FILE --to NAME",
		Example: `  # hand leadership to node2 (a caught-up healthy voter), e.g. before maintenance on the leader's host
  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2

  # only say whether it would
  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2 --dry-run`,
		Short: "Move leadership to a caught-up healthy voter",
		Long: `leader move hands leadership to the member --to names, which must be a voter
in the spec that answers and has caught up with the leader. It writes a
request the agents' loop carries out under the cluster lock and every rule
(an operator's pause holds it), follows it and exits with the outcome. It
acts without --yes (a leader move loses no data and takes a moment);
--dry-run prints the decision only. Exit status: 0 when done, 2 for a dry
run or a move that waits, 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if to == "" {
				return errors.New("--to NAME is required")
			}
			s, cli, err := openSpec(path, to, "--to")
			if err != nil {
				return err
			}
			defer cli.Close()
			if !dryRun {
				return runRequest(c.Context(), c.OutOrStdout(), s, cli, model.Request{Kind: model.RequestLeaderMove, To: to}, timeout)
			}
			decide := func(obs model.Cluster) reconcile.Step { return reconcile.LeaderMove(s.Members, obs, to) }
			return printNext(c.Context(), c.OutOrStdout(), s, cli, "without --dry-run it acts", decide)
		},
	}
	move.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	move.Flags().StringVar(&to, "to", "", "the member to lead")
	move.Flags().BoolVar(&dryRun, "dry-run", false, "print the decision only")
	move.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up (and withdraw the request) after this long")
	c.AddCommand(move)
	return c
}

// openSpec loads the spec and dials its members; name, when set, must be
// one of the spec's members (flag names the flag that gave it).
func openSpec(path, name, flag string) (*spec.Spec, *cluster.Client, error) {
	s, err := spec.Load(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not valid: %w", path, err)
	}
	if name != "" && !slices.ContainsFunc(s.Members, func(m spec.Member) bool { return m.Name == name }) {
		names := make([]string, len(s.Members))
		for i, m := range s.Members {
			names[i] = m.Name
		}
		return nil, nil, fmt.Errorf("%s %s: %s names no member of that name (its members: %s)", flag, name, path, strings.Join(names, ", "))
	}
	cli, err := dialSpec(s)
	if err != nil {
		return nil, nil, err
	}
	return s, cli, nil
}

// printNext prints what the agents' rules decide next for the command, and
// changes nothing (howToAct says how to act).
func printNext(ctx context.Context, out io.Writer, s *spec.Spec, cli *cluster.Client, howToAct string, decide func(model.Cluster) reconcile.Step) error {
	obs, err := observeAgain(ctx, cli)
	if err != nil {
		return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
	}
	if p, err := cli.GetPause(ctx, s.Cluster.Name); err == nil && p.InForce(time.Now()) {
		fmt.Fprintf(out, "%s: the agents and this command make no change until then\n", reconcile.PauseText(*p, time.Now()))
	}
	step := decide(obs)
	switch step.Kind {
	case reconcile.StepNone:
		fmt.Fprintf(out, "nothing to do: %s\n", step.Reason)
		return nil
	case reconcile.StepWait:
		fmt.Fprintf(out, "waits: %s\n", step.Reason)
		if reconcile.NoSpaceRaised(obs) {
			fmt.Fprintln(out, noSpaceText(s, obs))
		}
		return &exitError{code: 2, err: errors.New("waits")}
	}
	what := fmt.Sprintf("%s %s", step.Kind, step.Name)
	if step.Kind == reconcile.StepMoveLeader {
		// Name is the leader the step moves leadership from.
		what = fmt.Sprintf("%s from %s to %s", step.Kind, step.Name, nameOfID(obs, step.To))
	}
	fmt.Fprintf(out, "next: %s\n  why: %s\n(dry run: nothing changed; %s)\n", what, step.Reason, howToAct)
	return &exitError{code: 2, err: errors.New("dry run")}
}

// How runRequest follows the agents: an agent that has not taken the
// request up within requestPickUp is not running (or is older than the
// command); a request that every agent says waits, unchanged for
// requestSettle, waits for something the command cannot wait out (a
// pause, a member down, another actor).
const (
	requestPickUp = 30 * time.Second
	requestSettle = 15 * time.Second
	requestPoll   = 500 * time.Millisecond
)

// runRequest writes req for the agents' loop, follows what their records
// say of it, and exits with the outcome: 0 done, 2 waits, 1 an error. The
// request is withdrawn when this returns (its lease is revoked).
func runRequest(ctx context.Context, out io.Writer, s *spec.Spec, cli *cluster.Client, req model.Request, timeout time.Duration) error {
	obs, err := cli.Observe(ctx)
	if err != nil {
		return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
	}
	if reconcile.NoSpaceRaised(obs) {
		// etcd refuses the request's lease under NOSPACE, and the agents
		// run their own procedure then: say so rather than etcd's error,
		// and where the procedure stands.
		fmt.Fprintf(out, "waits: %s\n%s\n", reconcile.NoSpaceCommandWait, noSpaceText(s, obs))
		return &exitError{code: 2, err: errors.New("waits")}
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("the request's ID: %w", err)
	}
	req.ID, req.By, req.At = hex.EncodeToString(id[:]), whoAmI(), time.Now().UTC()
	q, err := cli.PutRequest(ctx, s.Cluster.Name, req)
	if errors.Is(err, cluster.ErrRequestPending) {
		other := "another operator's request"
		if q != nil && q.Other != nil {
			other = fmt.Sprintf("%s's request (%s, since %s)", q.Other.By, q.Other.Kind, q.Other.At.Format(time.RFC3339))
		}
		fmt.Fprintf(out, "waits: %s is under way: nothing changed; try again when it ends\n", other)
		return &exitError{code: 2, err: errors.New("waits")}
	}
	if err != nil {
		return err
	}
	defer func() { _ = q.Close() }()
	// Interrupted, the request is withdrawn before the command exits.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(out, "requested %s: the agents carry it out (interrupt to withdraw it)\n", req.Kind)
	return followRequest(ctx, out, s, cli, q, req, timeout)
}

// followRequest prints what the agents' records say of req until one
// says it is done, none acts and none changed its phase for
// requestSettle (the request waits on something the command cannot wait
// out), or timeout. What counts is typed (each agent's phase and steps);
// the texts are printed, never read: every agent's new steps (and their
// outcomes), a waiting one's reason when it begins to wait.
func followRequest(ctx context.Context, out io.Writer, s *spec.Spec, cli *cluster.Client, q *cluster.Requested, req model.Request, timeout time.Duration) error {
	begun, changed := time.Now(), time.Now()
	lost := false
	phases := map[string]model.RequestPhase{}
	steps := map[string]int{}
	for {
		recs, _ := cli.Agents(ctx, s.Cluster.Name) // unread: looked at again next poll
		waits := map[string]string{}
		acting, paused := false, false
		for _, r := range recs {
			p := r.Request
			if p == nil || p.ID != req.ID {
				continue
			}
			for _, st := range p.Steps[min(steps[r.Name], len(p.Steps)):] {
				fmt.Fprintf(out, "  %s: %s\n", r.Name, st)
				changed = time.Now()
			}
			steps[r.Name] = max(steps[r.Name], len(p.Steps))
			if p.Phase == model.RequestDone {
				fmt.Fprintf(out, "done: %s\n", p.Text)
				return nil
			}
			if phases[r.Name] != p.Phase {
				phases[r.Name], changed = p.Phase, time.Now()
				if p.Phase == model.RequestWaiting {
					fmt.Fprintf(out, "  %s: waits: %s\n", r.Name, p.Text)
				}
			}
			acting = acting || p.Phase == model.RequestActing
			paused = paused || r.Paused
			if p.Phase == model.RequestWaiting {
				waits[r.Name] = p.Text
			}
		}
		switch {
		case len(phases) > 0 && !acting && len(waits) > 0 && time.Since(changed) >= requestSettle:
			names := slices.Sorted(maps.Keys(waits))
			fmt.Fprintf(out, "waits: %s\n", waits[names[0]])
			if paused {
				fmt.Fprintf(out, "the agents are paused: nothing more is done until etcdkeeper resume --config %s\n", s.Path)
			}
			fmt.Fprintln(out, "(the request is withdrawn: nothing more is done for it)")
			return &exitError{code: 2, err: errors.New("waits")}
		case len(phases) == 0 && time.Since(begun) >= requestPickUp:
			return fmt.Errorf("no agent took the request up within %s (are the agents running, and as new as this command? etcdkeeper status): withdrawn, nothing changed", requestPickUp)
		case time.Since(begun) >= timeout:
			return fmt.Errorf("the request is not done after %s (--timeout): withdrawn; what was done stays done", timeout)
		}
		if lost {
			return fmt.Errorf("the request is gone from the cluster: its lease is gone (revoked, or run out while this command could not reach etcd for %ds) and no agent says it is done; the agents stopped on it, what was done stays done: run the command again to finish", cluster.RequestTTL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: the request is withdrawn: %w", ctx.Err())
		case <-q.Lost():
			lost = true // the records are read once more: done may be there
		case <-time.After(requestPoll):
		}
	}
}

// nameOfID is the name of member id as obs knows it, else its ID.
func nameOfID(obs model.Cluster, id uint64) string {
	if m, ok := obs.Member(id); ok && m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x", id)
}

// observeAgainFor bounds observeAgain: a member list or status call that
// times out right after a step (a leader hand-off, a defragmented member
// reopening its db on a slow disk) is tried again, for this long.
const observeAgainFor = 30 * time.Second

// observeAgain is observeTwice, tried again on an error until
// observeAgainFor has passed.
func observeAgain(ctx context.Context, cli *cluster.Client) (model.Cluster, error) {
	deadline := time.Now().Add(observeAgainFor)
	for {
		obs, err := observeTwice(ctx, cli)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return obs, err
		}
		select {
		case <-ctx.Done():
			return obs, err
		case <-time.After(time.Second):
		}
	}
}
