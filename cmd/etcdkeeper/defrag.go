package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
voters a quorum. It holds the cluster lock while it acts, so no agent changes
anything beside it. Without --yes it prints the next step and changes nothing.
Exit status: 0 when done or nothing is due, 2 for a dry run with a step due
or a step that waits, 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, cli, err := openSpec(path, member, "--member")
			if err != nil {
				return err
			}
			defer cli.Close()
			pol := reconcile.DefragPolicyOf(s.Maintenance.Defrag)
			pol.Member, pol.Done = member, map[uint64]bool{}
			decide := func(obs model.Cluster) reconcile.Step {
				return reconcile.DefragCommand(s.Members, obs, pol, s.Agent.LearnerTimeout.Duration)
			}
			return runSteps(c.Context(), c.OutOrStdout(), s, cli, yes, "--yes acts", decide, func(step reconcile.Step) {
				if step.Kind == reconcile.StepDefrag {
					pol.Done[step.MemberID] = true
				}
			})
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&member, "member", "", "defragment this member only, whatever its free space")
	c.Flags().BoolVar(&yes, "yes", false, "act; without it, print the next step only")
	return c
}

func leaderCmd() *cobra.Command {
	c := &cobra.Command{Use: "leader", Short: "Leadership: move it to another member",
		Example: `  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2`}
	var path, to string
	var dryRun bool
	move := &cobra.Command{
		Use: "move --config FILE --to NAME",
		Example: `  # hand leadership to node2 (a caught-up healthy voter), e.g. before maintenance on the leader's host
  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2

  # only say whether it would
  etcdkeeper leader move --config /etc/etcdkeeper/cluster.yaml --to node2 --dry-run`,
		Short: "Move leadership to a caught-up healthy voter",
		Long: `leader move hands leadership to the member --to names, which must be a voter
in the spec that answers and has caught up with the leader. It holds the
cluster lock while it acts. It acts without --yes (a leader move loses no
data and takes a moment); --dry-run prints the decision only.`,
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
			decide := func(obs model.Cluster) reconcile.Step { return reconcile.LeaderMove(s.Members, obs, to) }
			return runSteps(c.Context(), c.OutOrStdout(), s, cli, !dryRun, "without --dry-run it acts", decide, func(reconcile.Step) {})
		},
	}
	move.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	move.Flags().StringVar(&to, "to", "", "the member to lead")
	move.Flags().BoolVar(&dryRun, "dry-run", false, "print the decision only")
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

// maxSteps bounds one command: a leader move and a defragmentation per
// member, and some.
const maxSteps = 16

// runSteps is observe → decide (reconcile) → one step, again, under the
// cluster lock, until the decision has nothing left (StepNone) or waits.
// act false: print the first decision only (howToAct says how to act).
func runSteps(ctx context.Context, out io.Writer, s *spec.Spec, cli *cluster.Client, act bool, howToAct string, decide func(model.Cluster) reconcile.Step, did func(reconcile.Step)) error {
	// One look for NOSPACE (its alarm and sizes need no catch-up stamps);
	// every decision below observes afresh, under the lock when acting,
	// and stops too when NOSPACE was raised since (DefragCommand,
	// LeaderMove).
	first, err := cli.Observe(ctx)
	if err != nil {
		return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
	}
	if reconcile.NoSpaceRaised(first) {
		// etcd refuses the lock's lease under NOSPACE, and the agents run
		// their own procedure then: say so rather than etcd's error, and
		// where the procedure stands (status's line): when the data fills
		// the quota the agents cannot go on, and the operator must act.
		fmt.Fprintf(out, "waits: %s\n%s\n", reconcile.NoSpaceCommandWait, noSpaceText(s, first))
		return &exitError{code: 2, err: errors.New("waits")}
	}
	// An operator's pause holds these commands as it holds the agents and
	// recover: someone works on the cluster. A pause that cannot be read
	// is not taken for none.
	p, err := cli.GetPause(ctx, s.Cluster.Name)
	if err != nil {
		return fmt.Errorf("cannot read the agents' pause: %w", err)
	}
	if now := time.Now(); p.InForce(now) {
		if act {
			fmt.Fprintf(out, "waits: %s: nothing changed; etcdkeeper resume --config %s first\n", reconcile.PauseText(*p, now), s.Path)
			return &exitError{code: 2, err: errors.New("waits")}
		}
		fmt.Fprintf(out, "%s: the agents and this command make no change until then\n", reconcile.PauseText(*p, now))
	}
	var lock *cluster.Lock
	if act {
		l, err := cli.TryLock(ctx, s.Cluster.Name)
		if errors.Is(err, cluster.ErrLocked) {
			return fmt.Errorf("%w (an agent is changing something): nothing changed; try again in a moment", err)
		}
		if err != nil {
			return err
		}
		lock = l
		defer func() { _ = lock.Unlock(context.Background()) }()
	}
	for range maxSteps {
		obs, err := observeAgain(ctx, cli)
		if err != nil {
			return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
		}
		step := decide(obs)
		switch {
		case step.Kind == reconcile.StepNone && !act:
			fmt.Fprintf(out, "nothing to do: %s\n", step.Reason)
			return nil
		case step.Kind == reconcile.StepNone:
			fmt.Fprintf(out, "done: %s\n", step.Reason)
			return nil
		case step.Kind == reconcile.StepWait:
			if strings.Contains(step.Reason, "waits") {
				fmt.Fprintln(out, step.Reason)
			} else {
				fmt.Fprintf(out, "waits: %s\n", step.Reason)
			}
			return &exitError{code: 2, err: errors.New("waits")}
		case !act:
			what := fmt.Sprintf("%s %s", step.Kind, step.Name)
			if step.Kind == reconcile.StepMoveLeader {
				// Name is the leader the step moves leadership from.
				what = fmt.Sprintf("%s from %s to %s", step.Kind, step.Name, nameOfID(obs, step.To))
			}
			fmt.Fprintf(out, "next: %s\n  why: %s\n(dry run: nothing changed; %s)\n", what, step.Reason, howToAct)
			return &exitError{code: 2, err: errors.New("dry run")}
		}
		if err := takeStep(ctx, out, cli, lock, obs, step); err != nil {
			return err
		}
		did(step)
	}
	return fmt.Errorf("stopped after %d steps", maxSteps)
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

// takeStep makes the one call the step asks for, fenced by the lock.
func takeStep(ctx context.Context, out io.Writer, cli *cluster.Client, lock *cluster.Lock, obs model.Cluster, step reconcile.Step) error {
	m, ok := obs.Member(step.MemberID)
	if !ok || len(m.ClientURLs) == 0 {
		return fmt.Errorf("member %x has no client URL", step.MemberID)
	}
	switch step.Kind {
	case reconcile.StepMoveLeader:
		fenced, cancel, err := lock.Fence(ctx)
		defer cancel()
		if err != nil {
			return err
		}
		if err := cli.MoveLeader(fenced, m.ClientURLs[0], step.To); err != nil {
			return err
		}
		fmt.Fprintf(out, "moved leadership: %s\n", step.Reason)
	case reconcile.StepDefrag:
		if err := lock.Check(ctx); err != nil {
			return err
		}
		fmt.Fprintf(out, "defragmenting %s: %s, %s free\n", step.Name, reconcile.FmtBytes(m.DBSize), reconcile.FmtBytes(m.FreeBytes()))
		start := time.Now()
		if err := cli.Defragment(ctx, m.ClientURLs[0], cluster.DefragDeadline(m.DBSize)); err != nil {
			return err
		}
		after := "?"
		if st, err := cli.Status(ctx, m.ClientURLs[0]); err == nil {
			after = reconcile.FmtBytes(st.DbSize)
		}
		fmt.Fprintf(out, "defragmented %s: %s -> %s in %s\n", step.Name, reconcile.FmtBytes(m.DBSize), after, time.Since(start).Round(time.Millisecond))
	default:
		return fmt.Errorf("unexpected step %s", step.Kind)
	}
	return nil
}
