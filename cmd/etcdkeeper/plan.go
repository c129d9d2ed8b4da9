package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func planCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "plan --config FILE",
		Short: "Print the next membership change the agents would make now, and why; change nothing",
		Long: `plan observes the live cluster, runs the same decision the agents run, and
prints the one change it would make next with its reason, followed by every
difference between the spec and the cluster. It changes nothing.
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
			view, err := cli.Observe(c.Context())
			if err != nil {
				return fmt.Errorf("cannot observe the cluster through the spec's client URLs: %w", err)
			}
			obs := view
			model.Pending{}.Stamp(&obs, nil)
			step := reconcile.Plan(s.Members, obs, reconcile.Options{LearnerTimeout: s.Agent.LearnerTimeout.Duration})
			diff := reconcile.Diff(s.Members, obs)
			out := c.OutOrStdout()
			fmt.Fprintf(out, "next: %s", step.Kind)
			if step.Name != "" {
				fmt.Fprintf(out, " %s", step.Name)
			}
			fmt.Fprintf(out, "\n  why: %s\n", step.Reason)
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
