package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/user"
	"strings"
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
		Short: "Hold the agents: no membership change, repair, recovery step, rolling restart or disarm until resume",
		Long: `pause writes a pause into the cluster (the key /etcdkeeper/<cluster>/pause), which
every agent reads at each pass. While it is in force the agents change nothing
but restart their own etcd as it is after a crash; each says what it would have
done (in etcdkeeper status, plan and its log). A rejoin under way stays where it
is and goes on after resume. --for ends it by itself; resume ends it early.
A second pause replaces the first.
Without a quorum the cluster cannot hold it: pause then writes it to every
agent it reaches (this host's through its control socket, the others on
agent.recoveryAddr), each keeps it in its state dir until resume, and pause
names the agents it missed (exit status 2; 1 when it reached none).`,
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
			out := c.OutOrStdout()
			if err := cli.PutPause(c.Context(), s.Cluster.Name, p); err != nil {
				return pauseAgents(c, s, p, now, err)
			}
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
			out := c.OutOrStdout()
			now := time.Now()
			p, cerr := cli.DeletePause(c.Context(), s.Cluster.Name)
			local := postAgents(c.Context(), s, "/resume", nil)
			ended := false
			if cerr != nil {
				fmt.Fprintf(out, "the cluster's pause could not be removed (it needs a quorum): %v\n", cerr)
				if reached, _ := split(local); len(reached) > 0 {
					fmt.Fprintf(out, "resumed on the agents of %s: each drops the cluster's pause it holds and any kept on its host\n", strings.Join(reached, ", "))
				}
			} else if p.InForce(now) {
				fmt.Fprintf(out, "resumed: ended the pause by %s, taken %s ago%s\n", p.By, reconcile.Approx(now.Sub(p.Since)), inParens(p.Reason))
				ended = true
			}
			for _, a := range local {
				if a.Err == nil && a.Was != nil {
					fmt.Fprintf(out, "resumed %s: ended its local pause by %s, taken %s ago%s\n", a.Name, a.Was.By, reconcile.Approx(now.Sub(a.Was.Since)), inParens(a.Was.Reason))
					ended = true
				}
			}
			if missed := heldMissed(c.Context(), cli, s, local, cerr == nil); len(missed) > 0 {
				fmt.Fprintf(out, "  agents not reached (a pause kept on their host stays until resume reaches them): %s\n", strings.Join(missed, "; "))
			}
			switch {
			case cerr != nil:
				return &exitError{code: 1, err: fmt.Errorf("resume: %w", cerr)}
			case ended:
				fmt.Fprintln(out, "  the agents act again at their next pass")
			default:
				fmt.Fprintln(out, "not paused: nothing to resume")
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	return c
}

// pauseAgents writes the pause to every agent it reaches when the
// cluster cannot hold it (no quorum): each keeps it in its state dir and
// honours it until resume.
func pauseAgents(c *cobra.Command, s *spec.Spec, p model.Pause, now time.Time, cause error) error {
	out := c.OutOrStdout()
	fmt.Fprintf(out, "the cluster could not take the pause (it needs a quorum): %v\n", cause)
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode the pause: %w", err)
	}
	reached, missed := split(postAgents(c.Context(), s, "/pause", body))
	if len(reached) > 0 {
		fmt.Fprintf(out, "%s, on the agents of %s: each keeps it on its host until etcdkeeper resume\n", pausedLine(p, now), strings.Join(reached, ", "))
	}
	if len(missed) == 0 {
		return nil
	}
	fmt.Fprintf(out, "  not paused (not reached): %s\n", strings.Join(missed, "; "))
	if len(reached) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("paused no agent")}
	}
	return &exitError{code: 2, err: fmt.Errorf("paused %d of %d agents", len(reached), len(s.Members))}
}

// heldMissed are the agents resume did not reach that may keep a local
// pause: with the cluster answering, those whose record says they are
// held by one; without, every one not reached.
func heldMissed(ctx context.Context, cli *cluster.Client, s *spec.Spec, as []agentAnswer, quorum bool) []string {
	held := map[string]bool{}
	if quorum {
		recs, err := cli.Agents(ctx, s.Cluster.Name)
		if err != nil {
			quorum = false
		}
		for _, r := range recs {
			held[r.Name] = r.PausedLocal
		}
	}
	var out []string
	for _, a := range as {
		if a.Err != nil && (!quorum || held[a.Name]) {
			out = append(out, fmt.Sprintf("%s (%v)", a.Name, a.Err))
		}
	}
	return out
}

func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
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

// printPaused shows, below the status table, each paused agent's account:
// the pause and what it would do.
func printPaused(w io.Writer, rows []statusRow) {
	for _, r := range rows {
		if r.Paused {
			fmt.Fprintf(w, "%s: %s\n", r.Name, r.Decision)
		}
	}
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
