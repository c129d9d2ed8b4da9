package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func planCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use: "plan --config FILE",
		Example: `  # after editing the spec: what will the agents change, and why?
  etcdkeeper plan --config /etc/etcdkeeper/cluster.yaml`,
		Short: "Print the next membership change the agents would make now, and why; change nothing",
		Long: `plan observes the live cluster, runs the same decision the agents run, and
prints the one change it would make next with its reason, followed by every
difference between the spec and the cluster. It changes nothing. While the
agents are paused (etcdkeeper pause) it says so first, and the change is what
they would make once resumed.
It observes twice, a second apart, to see whose raft index rises: a voter
counts toward a removal (or an agent's restart or stop) only when it has
caught up, and plan lists the ones that have not.
Exit status: 0 when nothing is to be done, 2 when changes are pending, 1 on error.
(Learner timeouts count from now: plan does not know how long a learner has waited.)`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), err)
				return fmt.Errorf("%s is not valid", path)
			}
			cli, err := dialSpec(s)
			if err != nil {
				return err
			}
			defer cli.Close()
			obs, err := observeTwice(c.Context(), cli)
			if err != nil {
				return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
			}
			model.Pending{}.Stamp(&obs, nil)
			step := reconcile.Plan(s.Members, obs, reconcile.Options{LearnerTimeout: s.Agent.LearnerTimeout.Duration})
			diff := reconcile.Diff(s.Members, obs)
			out := c.OutOrStdout()
			next := "next"
			if p, err := cli.GetPause(c.Context(), s.Cluster.Name); err == nil && p.InForce(time.Now()) {
				fmt.Fprintf(out, "%s: the agents make no change until then\n", reconcile.PauseText(*p, time.Now()))
				next = "would now (after resume)"
			}
			if ns := noSpaceText(s, obs); ns != "" {
				// etcd refuses the cluster lock under NOSPACE: no change or
				// maintenance can run until the procedure has cleared it.
				fmt.Fprintf(out, "%s\nmembership changes and maintenance wait until NOSPACE is cleared (etcd refuses the cluster lock's lease)\n", ns)
				if step.Kind != reconcile.StepNone {
					fmt.Fprintf(out, "after NOSPACE: %s %s\n  why: %s\n", step.Kind, step.Name, step.Reason)
				}
				return &exitError{code: 2, err: errors.New("NOSPACE is raised")}
			}
			fmt.Fprintf(out, "%s: %s", next, step.Kind)
			if step.Name != "" {
				fmt.Fprintf(out, " %s", step.Name)
			}
			fmt.Fprintf(out, "\n  why: %s\n", step.Reason)
			if step.Kind == reconcile.StepNone {
				recs, _ := cli.Agents(c.Context(), s.Cluster.Name) // unread: the online way
				m := reconcile.PlanMaintenance(s.Members, obs, recs, reconcile.DefragPolicyOf(s.Maintenance.Defrag))
				fmt.Fprintf(out, "maintenance: %s", m.Kind)
				if m.Name != "" {
					fmt.Fprintf(out, " %s", m.Name)
				}
				fmt.Fprintf(out, "\n  why: %s\n", m.Reason)
			} else {
				fmt.Fprintln(out, "maintenance: waits for the membership change")
			}
			if recs, err := cli.Agents(c.Context(), s.Cluster.Name); err == nil {
				if r := reconcile.RolloutText(obs, recs); r != "" {
					fmt.Fprintf(out, "rollout: %s\n", r)
				}
				printRotationLines(out, s, recs)
			}
			want := spec.BuiltinVersion()
			if s.Etcd.Binary != "" {
				// spec.Load ran it already: it says its version.
				b, _ := spec.ReadBinary(s.Etcd.Binary)
				want = b.Version
			}
			for _, p := range reconcile.PreflightErrors(s, obs, want) {
				fmt.Fprintf(out, "%s\n", p)
			}
			if lag := model.NewView(obs, nil).Lagging(0); len(lag) > 0 {
				fmt.Fprintf(out, "catching up (%d): restarts, stops for repair and removals of serving members wait for these:\n", len(lag))
				for _, l := range lag {
					fmt.Fprintf(out, "  waiting: %s\n", l)
				}
			}
			if len(diff) == 0 {
				fmt.Fprintln(out, "diff: the cluster matches the spec")
				return nil
			}
			fmt.Fprintf(out, "diff (%d):\n", len(diff))
			for _, d := range diff {
				fmt.Fprintf(out, "  %s\n", d)
			}
			return &exitError{code: 2, err: fmt.Errorf("changes pending")}
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	return c
}

// observeTwice observes the cluster, then again a second later: the
// client marks a voter caught up only when its index is level with the
// leader's or rose in between (model.CaughtUp).
func observeTwice(ctx context.Context, cli *cluster.Client) (model.Cluster, error) {
	if _, err := cli.Observe(ctx); err != nil {
		return model.Cluster{}, err
	}
	select {
	case <-ctx.Done():
		return model.Cluster{}, ctx.Err()
	case <-time.After(time.Second):
	}
	return cli.Observe(ctx)
}
