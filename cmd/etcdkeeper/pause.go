package main

import (
	"fmt"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func pauseCmd() *cobra.Command {
	var path, reason string
	var d time.Duration
	c := &cobra.Command{
		Use:   "pause --config FILE [--for 2h] [--reason TEXT]",
		Short: "Hold the agents: no membership change, repair, recovery step, restart for settings or disarm until resume",
		Long: `pause writes a pause into the cluster (the key /etcdkeeper/<cluster>/pause), which
every agent reads at each pass. While it is in force the agents change nothing
but restart their own etcd as it is after a crash; each says what it would have
done (in etcdkeeper status, plan and its log). A rejoin under way stays where it
is and goes on after resume. --for ends it by itself; resume ends it early.
A second pause replaces the first.`,
		Example: `  etcdkeeper pause --config /etc/etcdkeeper/cluster.yaml --for 2h --reason "replacing node2's disk"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if d < 0 || d > cluster.MaxPauseTTL {
				return fmt.Errorf("--for %s: give a duration between 1s and %s (etcd's longest lease), or leave it out to pause until resume", d, cluster.MaxPauseTTL)
			}
			if d > 0 && d < time.Second {
				return fmt.Errorf("--for %s: etcd's leases count whole seconds; give at least 1s", d)
			}
			s, err := loadSpec(c, path)
			if err != nil {
				return err
			}
			now := time.Now()
			p := model.Pause{By: whoAmI(), Reason: reason, Since: now.UTC()}
			if d > 0 {
				p.Until = now.Add(d).UTC()
			}
			cli, err := dialSpec(s)
			if err != nil {
				return err
			}
			defer cli.Close()
			if err := cli.PutPause(c.Context(), s.Cluster.Name, p); err != nil {
				return fmt.Errorf("the pause could not be written to the cluster (it needs a quorum): %w", err)
			}
			out := c.OutOrStdout()
			fmt.Fprintln(out, pausedLine(p, now))
			fmt.Fprintf(out, "  the agents restart their own etcd after a crash and change nothing else; etcdkeeper resume --config %s ends it\n", path)
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().DurationVar(&d, "for", 0, "end the pause by itself after this long (default: until resume)")
	c.Flags().StringVar(&reason, "reason", "", "why, shown in every agent's decision")
	return c
}

func resumeCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:     "resume --config FILE",
		Short:   "End a pause: the agents act again at their next pass",
		Example: `  etcdkeeper resume --config /etc/etcdkeeper/cluster.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := loadSpec(c, path)
			if err != nil {
				return err
			}
			cli, err := dialSpec(s)
			if err != nil {
				return err
			}
			defer cli.Close()
			p, err := cli.DeletePause(c.Context(), s.Cluster.Name)
			if err != nil {
				return fmt.Errorf("the pause could not be removed from the cluster (it needs a quorum): %w", err)
			}
			out := c.OutOrStdout()
			now := time.Now()
			if !p.InForce(now) {
				fmt.Fprintln(out, "not paused: nothing to resume")
				return nil
			}
			fmt.Fprintf(out, "resumed: ended the pause by %s, taken %s ago", p.By, reconcile.Approx(now.Sub(p.Since)))
			if p.Reason != "" {
				fmt.Fprintf(out, " (%s)", p.Reason)
			}
			fmt.Fprintln(out, "; the agents act again at their next pass")
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	return c
}

// pausedLine is what pause prints: "paused by root@node1 for 2h (until
// 2026-12-01T21:30:00Z): replacing a disk".
func pausedLine(p model.Pause, now time.Time) string {
	line := "paused by " + p.By
	if p.Until.IsZero() {
		line += " until etcdkeeper resume"
	} else {
		line += fmt.Sprintf(" for %s (until %s)", reconcile.Approx(p.Until.Sub(now)), p.Until.Format(time.RFC3339))
	}
	if p.Reason != "" {
		line += ": " + p.Reason
	}
	return line
}

// whoAmI is the pause's author: user@host.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return name + "@" + hostname()
}

func loadSpec(c *cobra.Command, path string) (*spec.Spec, error) {
	s, err := spec.Load(path)
	if err != nil {
		fmt.Fprintln(c.ErrOrStderr(), err)
		return nil, fmt.Errorf("%s is not valid", path)
	}
	return s, nil
}
