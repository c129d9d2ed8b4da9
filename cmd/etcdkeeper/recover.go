package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

type recoverFlags struct {
	config, name, from, snapshot, id, output string
	yes, force                               bool
	assumeFenced                             []string
	abort                                    string
	wait, sourceWait                         time.Duration
	bump                                     uint64
}

func recoverCmd() *cobra.Command {
	var f recoverFlags
	c := &cobra.Command{
		Use: "recover --config FILE [--from NAME | --from-snapshot FILE] [--yes]",
		Example: `  # look first: what each member's data holds, and the recommendation (changes nothing)
  etcdkeeper recover --config /etc/etcdkeeper/cluster.yaml

  # recover from node1's data, or from a verified snapshot on this host
  etcdkeeper recover --config /etc/etcdkeeper/cluster.yaml --from node1 --yes
  etcdkeeper recover --config /etc/etcdkeeper/cluster.yaml --from-snapshot /var/lib/etcdkeeper/node1/backups/prod-20260301T120000Z-rev48213.db --yes

  # on a host that recover did not reach: take part in that recovery
  etcdkeeper recover --config /etc/etcdkeeper/cluster.yaml --from node1 --yes --id 20261130T172412Z-895e2c

  # call off the fences of a recovery whose source never started
  etcdkeeper recover --config /etc/etcdkeeper/cluster.yaml --abort 20261130T172412Z-895e2c`,
		Short: "Plan or carry out the recovery of a cluster that lost its quorum",
		Long: `recover asks every member's agent (this host's through its control socket, as
root or the agent's user; the others over agent.recoveryAddr, or agent.addr) what
its data holds: data healthy, corrupt or empty, the raft term and index, the
revision, the cluster and member IDs, the newest verified snapshot. It says
whether a quorum of voters is healthy now, which member to recover from (the
usable data that goes furthest) and what that would lose. It changes nothing.

--from NAME --yes recovers from NAME's data: NAME's agent restarts its etcd as a
one-member cluster (--force-new-cluster: the other members and learners dropped,
NAME's member ID and every key kept); every other agent stops its old member for
good and rejoins the recovered cluster through the ordinary rejoin path (data
moved aside, never deleted; added as a learner; promoted), one at a time.

--from-snapshot FILE --yes, run on the host that holds FILE, recovers from a
snapshot when no member's data is usable: this host's agent moves its data dir
aside, restores FILE as a new one-member cluster with the revision bumped past the
snapshot's (--bump-revision, marked compacted, so that watchers never see a
revision go back), and the others rejoin it.

Refused, with nothing changed, while a quorum of voters is healthy, when
NAME's data is corrupt or empty, or unless NAME, the members fenced and those
passed with --assume-fenced are a majority of every voter set anyone knows (the
spec's members, and the membership each agent's etcd or data reports): else the
old cluster, or a second recovery, could go on next to this one. recover
follows the source's journal after asking it: when the source refuses, the
fences are called off; when it cannot tell, they stay (reported as stale by
their agents after 2 minutes) until the source starts or recover --abort ID. Every host journals its part: a kill at any step
resumes. An agent that cannot be reached is told later: run the command that
recover prints on that host (same recovery --id).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runRecover(c.OutOrStdout(), f) },
	}
	c.Flags().StringVarP(&f.config, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file shared by all hosts")
	c.Flags().StringVar(&f.name, "name", "", "this host's member name (default: the host name); --from-snapshot makes it the source")
	c.Flags().StringVar(&f.from, "from", "", "recover from this member's data")
	c.Flags().StringVar(&f.snapshot, "from-snapshot", "", "recover from this snapshot file on this host")
	c.Flags().BoolVar(&f.yes, "yes", false, "carry out the recovery (without it, recover only shows what it would do)")
	c.Flags().StringVar(&f.id, "id", "", "the recovery to take part in (printed by an earlier recover --yes): tells the agents it did not reach")
	c.Flags().StringVar(&f.abort, "abort", "", "call off the fences of recovery ID on the agents recover reaches (its source never started); refused while the source cannot be reached")
	c.Flags().BoolVar(&f.force, "force", false, "with --abort: call the fences off although the source cannot be reached (you know it will never start)")
	c.Flags().DurationVar(&f.sourceWait, "source-wait", recovery.DefaultDeadlines.SourceStart, "how long to wait for the source to start after --yes (the fences stay after it, reported as stale)")
	c.Flags().StringSliceVar(&f.assumeFenced, "assume-fenced", nil, "members (names, or member IDs in hex) whose hosts are off for good, or that this recovery fenced on their own hosts (recover --id there): recover cannot reach them")
	c.Flags().DurationVar(&f.wait, "wait", 10*time.Minute, "how long to wait for every member to be a healthy voter after --yes (0: do not wait)")
	c.Flags().Uint64Var(&f.bump, "bump-revision", 1_000_000_000, "with --from-snapshot: how far the restored revision is moved past the snapshot's")
	c.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
	return c
}

// planReport is what recover prints (-o json).
type planReport struct {
	Members        []recovery.Inspection   `json:"members"`
	Quorum         recovery.QuorumState    `json:"quorum"`
	Recommendation recovery.Recommendation `json:"recommendation"`
}

// runRecover parses, asks the agents, prints the plan, and hands the
// recovery to recovery.Command: the decisions are there.
func runRecover(w io.Writer, f recoverFlags) error {
	if f.from != "" && f.snapshot != "" {
		return errors.New("--from and --from-snapshot exclude each other")
	}
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("-o %q: use table or json", f.output)
	}
	s, err := spec.Load(f.config)
	if err != nil {
		return err
	}
	ag, err := newAgents(s, f.name)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dl := recovery.DefaultDeadlines
	dl.SourceStart = f.sourceWait
	rep := planReport{Members: ag.inspectAll(ctx, dl.Call), Quorum: quorumNow(ctx, s)}
	rep.Recommendation = recovery.Recommend(rep.Members, time.Now())
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printPlan(w, rep, f)
	}
	cmd := recovery.Command{Agents: ag, Spec: s.Names(), Config: s.Path, Deadlines: dl,
		Say: func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }}
	if f.abort != "" {
		return cmd.Abort(ctx, rep.Members, f.abort, f.force)
	}
	if f.from == "" && f.snapshot == "" {
		return nil
	}
	src := f.from
	if f.snapshot != "" {
		if !ag.selfListed {
			return fmt.Errorf("--from-snapshot restores on this host: pass --name with this host's member name (%q is not in the spec)", ag.self.Name)
		}
		src = ag.self.Name
	}
	if _, ok := s.Lookup(src); !ok {
		return fmt.Errorf("--from %s: not a member of the spec (members: %v)", src, s.Names())
	}
	if !f.yes {
		fmt.Fprintf(w, "\nWould recover from %s. Nothing was changed: run again with --yes to do it.\n", what(f))
		return nil
	}
	// The snapshot is checked here as far as this command can read it,
	// and in full (decrypted with the agent's identity file) by the
	// agent before it changes anything.
	keys := backup.KeysToRead(s.Backup.Encryption)
	if keys.Refused != nil {
		fmt.Fprintf(w, "warning: %v: this host reads snapshots but takes no new one until that is put right\n", keys.Refused)
	}
	rec, err := recoveryRequest(f, src, rep, keys)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(w, "\nRecovery %s from %s:\n", rec.Request.ID, what(f))
	if err := cmd.Start(ctx, rep.Members, rec); err != nil {
		return err
	}
	return waitRecovered(ctx, w, s, f.wait, start)
}

// recoveryRequest is the source's request: a new recovery, or --id's;
// refused (nothing changed) while the recovery must not start.
func recoveryRequest(f recoverFlags, src string, rep planReport, keys backup.Keys) (recovery.Recovery, error) {
	rec := recovery.Recovery{Request: recovery.Request{ID: f.id, Role: recovery.RoleSource, Source: src, RevisionBump: f.bump}, Assumed: f.assumeFenced}
	if f.id == "" {
		rec.Request.ID = newRecoveryID()
	} else {
		started, err := recovery.Resume(f.id, src, rep.Members)
		if err != nil {
			return rec, err
		}
		rec.Started = started
	}
	if !rec.Started {
		if err := recovery.CheckStart(rep.Members, src, rep.Quorum, rec.Request.ID, f.snapshot != "", f.id != ""); err != nil {
			return rec, fmt.Errorf("recovery refused: %w", err)
		}
		if f.snapshot != "" {
			if err := backup.Precheck(f.snapshot, keys); err != nil {
				return rec, fmt.Errorf("recovery refused: the snapshot %s cannot be restored: %w; nothing was changed", f.snapshot, err)
			}
		}
	}
	if f.snapshot != "" {
		p, err := filepath.Abs(f.snapshot)
		if err != nil {
			return rec, fmt.Errorf("--from-snapshot: %w", err)
		}
		rec.Request.Snapshot = p
	}
	for _, i := range rep.Members {
		if i.Name == src && i.ClusterID != "" {
			rec.Request.OldClusterID, _ = strconv.ParseUint(i.ClusterID, 16, 64)
		}
	}
	return rec, nil
}

func what(f recoverFlags) string {
	if f.snapshot != "" {
		return "the snapshot " + f.snapshot
	}
	return f.from + "'s data"
}

// waitRecovered waits until every member of the spec is a healthy voter.
func waitRecovered(ctx context.Context, w io.Writer, s *spec.Spec, d time.Duration, start time.Time) error {
	if d <= 0 {
		fmt.Fprintln(w, "Not waiting (--wait 0): follow it with etcdkeeper status.")
		return nil
	}
	begin, last := time.Now(), -1
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, _ := observeView(cctx, s)
		cancel()
		healthy, voters := v.Serving, v.Voters
		if healthy != last {
			fmt.Fprintf(w, "  %6.1fs: %d healthy voters of %d (spec: %d members)\n", time.Since(start).Seconds(), healthy, voters, len(s.Members))
			last = healthy
		}
		waited := time.Since(begin)
		if ctx.Err() != nil {
			waited = d
		}
		if done, err := recovery.DecideRecovered(healthy, voters, len(s.Members), waited, d); done {
			if err == nil {
				fmt.Fprintf(w, "Recovered: %d healthy voters, %.1fs after recover --yes.\n", healthy, time.Since(start).Seconds())
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// observeView is the cluster's model.View as etcd answers (an error when
// no member answers with a leader).
func observeView(ctx context.Context, s *spec.Spec) (model.View, error) {
	cli, err := dialSpec(s)
	if err != nil {
		return model.View{}, err
	}
	defer cli.Close()
	v, err := cli.Observe(ctx)
	if err != nil {
		return model.View{}, fmt.Errorf("no member answers with a leader: %w", err)
	}
	return model.NewView(v, nil), nil
}

// quorumNow is whether a quorum of voters is healthy, as etcd answers.
func quorumNow(ctx context.Context, s *spec.Spec) recovery.QuorumState {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := observeView(octx, s)
	if err != nil {
		return recovery.QuorumState{Detail: err.Error()}
	}
	ok, detail := v.HasQuorum()
	return recovery.QuorumState{Healthy: ok, Detail: detail}
}

func newRecoveryID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

func printPlan(w io.Writer, rep planReport, f recoverFlags) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tAGENT\tETCD\tDATA\tCLUSTER\tMEMBER ID\tTERM\tINDEX\tREVISION\tSNAPSHOT\tRECOVERY")
	for _, i := range rep.Members {
		agent, etcd := "ok", "stopped"
		if !i.Reachable {
			agent = "unreachable"
		}
		if i.EtcdRunning {
			etcd = "running"
		}
		snap := "-"
		if i.Snapshot != nil {
			snap = fmt.Sprintf("rev %d, %s ago", i.Snapshot.Revision, time.Since(i.Snapshot.TakenAt).Round(time.Second))
		}
		rec := "-"
		if i.Recovery != nil {
			rec = fmt.Sprintf("%s %s %s", i.Recovery.ID, i.Recovery.Role, i.Recovery.Step)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", i.Name, agent, etcd, orDash(i.Data), orDash(i.ClusterID), orDash(i.MemberID),
			i.Term, i.Index, i.Revision, snap, rec)
	}
	_ = tw.Flush()
	for _, i := range rep.Members {
		switch {
		case !i.Reachable:
			fmt.Fprintf(w, "%s: agent not reached: %s\n", i.Name, i.Error)
		case !i.Usable() && i.Reason != "":
			fmt.Fprintf(w, "%s: %s: %s\n", i.Name, i.Data, i.Reason)
		}
	}
	q := "NOT healthy"
	if rep.Quorum.Healthy {
		q = "healthy"
	}
	fmt.Fprintf(w, "\nQuorum: %s (%s)\n", q, rep.Quorum.Detail)
	known := recovery.KnownVoters(specNames(rep.Members), rep.Members).Known()
	fmt.Fprintf(w, "Voters known (the spec and each agent's report): %s: a recovery needs the source, the fenced and the assumed to be a majority of them\n", strings.Join(known, ", "))
	r := rep.Recommendation
	if rep.Quorum.Healthy {
		fmt.Fprintln(w, "The cluster needs no recovery.")
		return
	}
	if r.Source == "" {
		fmt.Fprintf(w, "Recommendation: %s\n", r.Why)
		return
	}
	fmt.Fprintf(w, "Recommendation: recover from %s: %s\n", r.Source, r.Why)
	for _, l := range r.Loss {
		fmt.Fprintf(w, "  would lose: %s\n", l)
	}
	if f.from == "" && f.snapshot == "" {
		fmt.Fprintf(w, "To do it: etcdkeeper recover --config %s --from %s --yes\n", f.config, r.Source)
	}
}

func specNames(ins []recovery.Inspection) []string {
	var out []string
	for _, i := range ins {
		out = append(out, i.Name)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
