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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

type recoverFlags struct {
	config, name, from, snapshot, id, output string
	yes                                      bool
	assumeFenced                             []string
	abort                                    string
	wait                                     time.Duration
	bump                                     uint64
}

func recoverCmd() *cobra.Command {
	var f recoverFlags
	c := &cobra.Command{
		Use:   "recover --config FILE [--from NAME | --from-snapshot FILE] [--yes]",
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

Refused, with nothing changed, while a quorum of voters is healthy, or when
NAME's data is corrupt or empty. Every host journals its part: a kill at any step
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
	c.Flags().StringVar(&f.abort, "abort", "", "call off the fences of recovery ID on the agents recover reaches (its source never started)")
	c.Flags().StringSliceVar(&f.assumeFenced, "assume-fenced", nil, "members whose hosts are off for good, or that this recovery fenced on their own hosts (recover --id there): recover cannot reach them")
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ag, err := newAgents(s, f.name)
	if err != nil {
		return err
	}
	rep := planReport{Members: ag.inspectAll(ctx), Quorum: quorumNow(ctx, s)}
	rep.Recommendation = recovery.Recommend(rep.Members, time.Now())
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printPlan(w, rep, f)
	}
	if f.abort != "" {
		return ag.abortAll(ctx, w, f.abort, rep)
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
	id, started, err := recoveryOf(f.id, src, rep)
	if err != nil {
		return err
	}
	if !started {
		if err := checkRecovery(f, src, id, rep); err != nil {
			return fmt.Errorf("recovery refused: %w", err)
		}
	}
	if err := checkUnfenced(s, src, rep, f.assumeFenced, nil, false); err != nil {
		return fmt.Errorf("recovery refused: %w", err)
	}
	req := recovery.Request{ID: id, Role: recovery.RoleSource, Source: src, RevisionBump: f.bump}
	if f.snapshot != "" {
		if req.Snapshot, err = filepath.Abs(f.snapshot); err != nil {
			return err
		}
	}
	for _, i := range rep.Members {
		if i.Name == src && i.ClusterID != "" {
			req.OldClusterID, _ = strconv.ParseUint(i.ClusterID, 16, 64)
		}
	}
	start := time.Now()
	fmt.Fprintf(w, "\nRecovery %s from %s:\n", id, what(f))
	// Fence first: no old member may run once the source is forced.
	fenced, missed := ag.fenceOthers(ctx, w, req, rep)
	if err := checkUnfenced(s, src, rep, f.assumeFenced, fenced, true); err != nil {
		ag.abort(ctx, w, req, fenced)
		return fmt.Errorf("recovery refused: %w", err)
	}
	srcIn := inspectionOf(rep, src)
	switch {
	case !srcIn.Reachable:
		fmt.Fprintf(w, "  %s (the source) was not reached: on %s, run: etcdkeeper recover --config %s --from %s --yes --id %s --assume-fenced %s\n",
			src, src, s.Path, src, id, strings.Join(append(fenced, f.assumeFenced...), ","))
		return nil
	case !started:
		fmt.Fprintf(w, "  %s: ", src)
		j, err := ag.post(ctx, src, req)
		if err != nil {
			fmt.Fprintln(w, "not started")
			ag.abort(ctx, w, req, fenced)
			return fmt.Errorf("the source %s did not take the recovery: %w", src, err)
		}
		fmt.Fprintf(w, "source (step %s)\n", j.Step)
	}
	for _, n := range missed {
		if slices.Contains(f.assumeFenced, n) {
			continue
		}
		fmt.Fprintf(w, "  %s was not reached: on %s, run: etcdkeeper recover --config %s --from %s --yes --id %s\n", n, n, s.Path, src, id)
	}
	return waitRecovered(ctx, w, s, f.wait, start)
}

// recoveryOf is the recovery to carry out: a new one, or id (recover run
// again, or on the next host in turn), whose source must be src. started:
// the source's agent has it already.
func recoveryOf(id, src string, rep planReport) (string, bool, error) {
	if id == "" {
		return newRecoveryID(), false, nil
	}
	if err := (recovery.Request{ID: id, Role: recovery.RoleFenced, Source: src}).Check(); err != nil {
		return "", false, fmt.Errorf("--id: %w", err)
	}
	started := false
	for _, i := range rep.Members {
		j := i.Recovery
		if j == nil || j.ID != id {
			continue
		}
		if j.Source != src {
			return "", false, fmt.Errorf("recovery %s is from %s, not %s", id, j.Source, src)
		}
		if i.Name == src && j.Role == recovery.RoleSource {
			started = true
		}
	}
	return id, started, nil
}

// checkRecovery is the refusal before a recovery starts: a quorum is
// healthy, the source's data is not usable, the snapshot does not verify.
func checkRecovery(f recoverFlags, src, id string, rep planReport) error {
	if f.snapshot == "" {
		if !inspectionOf(rep, src).Reachable && f.id != "" {
			// Fencing this host's side first, the source out of reach: the
			// source checks its own data when its turn comes.
			return recovery.CheckFromSnapshot(rep.Members, rep.Quorum, id)
		}
		return recovery.CheckFrom(rep.Members, src, rep.Quorum, id)
	}
	if err := recovery.CheckFromSnapshot(rep.Members, rep.Quorum, id); err != nil {
		return err
	}
	if _, _, _, err := backup.Verify(f.snapshot); err != nil {
		return fmt.Errorf("the snapshot %s does not verify: %w; nothing was changed", f.snapshot, err)
	}
	return nil
}

// checkUnfenced refuses while the old members recover has not fenced (nor
// the operator vouched for, --assume-fenced) could still form a quorum of
// the old cluster: they would go on next to the recovered one.
// Before the fences (after false) an agent that answers counts as one to
// be fenced; after them only those fenced count.
func checkUnfenced(s *spec.Spec, src string, rep planReport, assumed, fenced []string, after bool) error {
	var open []string
	for _, i := range rep.Members {
		if i.Name == src || slices.Contains(assumed, i.Name) {
			continue
		}
		if slices.Contains(fenced, i.Name) || (!after && i.Reachable) {
			continue
		}
		open = append(open, i.Name)
	}
	if q := model.Quorum(len(s.Members)); len(open) >= q {
		return fmt.Errorf("%s cannot be fenced from here, and %d old members are a quorum of the old cluster: they could go on next to the recovered one. "+
			"Make their agents reachable (agent.recoveryAddr), or run this command with --id on each of them first and then on %s with --assume-fenced, "+
			"or pass --assume-fenced for hosts that are off for good; nothing was changed",
			strings.Join(open, ", "), q, src)
	}
	return nil
}

func inspectionOf(rep planReport, name string) recovery.Inspection {
	for _, i := range rep.Members {
		if i.Name == name {
			return i
		}
	}
	return recovery.Inspection{Name: name}
}

func what(f recoverFlags) string {
	if f.snapshot != "" {
		return "the snapshot " + f.snapshot
	}
	return f.from + "'s data"
}

// fenceOthers asks every agent but the source to fence its member; it
// returns the names it fenced and those it could not reach.
func (ag *agents) fenceOthers(ctx context.Context, w io.Writer, src recovery.Request, rep planReport) (fenced, missed []string) {
	for _, i := range rep.Members {
		if i.Name == src.Source {
			continue
		}
		if !i.Reachable {
			missed = append(missed, i.Name)
			continue
		}
		r := src
		r.Role, r.Snapshot, r.RevisionBump = recovery.RoleFenced, "", 0
		j, err := ag.post(ctx, i.Name, r)
		if err != nil {
			fmt.Fprintf(w, "  %s: not fenced: %v\n", i.Name, err)
			missed = append(missed, i.Name)
			continue
		}
		fenced = append(fenced, i.Name)
		fmt.Fprintf(w, "  %s: fenced (step %s): its old member stays stopped; it rejoins the recovered cluster\n", i.Name, j.Step)
	}
	return fenced, missed
}

// abortAll calls off the open fences of recovery id on the agents it
// reaches, unless its source has started (then the recovery goes on).
func (ag *agents) abortAll(ctx context.Context, w io.Writer, id string, rep planReport) error {
	var fenced []string
	src := ""
	for _, i := range rep.Members {
		j := i.Recovery
		if j == nil || j.ID != id {
			continue
		}
		if j.Role == recovery.RoleSource && j.Step != recovery.StepRefused {
			return fmt.Errorf("recovery %s has started on its source %s (step %s): it is not called off; let it finish", id, i.Name, j.Step)
		}
		src = j.Source
		if j.Role == recovery.RoleFenced && j.Open() {
			fenced = append(fenced, i.Name)
		}
	}
	if len(fenced) == 0 {
		return fmt.Errorf("no open fence of recovery %s on the agents reached", id)
	}
	fmt.Fprintf(w, "\nCalling off recovery %s:\n", id)
	ag.abort(ctx, w, recovery.Request{ID: id, Source: src}, fenced)
	return nil
}

// abort calls the fences off when the recovery cannot go on: their old
// members run as before.
func (ag *agents) abort(ctx context.Context, w io.Writer, src recovery.Request, fenced []string) {
	for _, n := range fenced {
		r := src
		r.Role, r.Snapshot, r.RevisionBump, r.Abort = recovery.RoleFenced, "", 0, true
		if _, err := ag.post(ctx, n, r); err != nil {
			fmt.Fprintf(w, "  %s: the fence could not be called off: %v (on %s, run: etcdkeeper recover --config F --abort %s)\n", n, err, n, src.ID)
			continue
		}
		fmt.Fprintf(w, "  %s: fence called off\n", n)
	}
}

// waitRecovered waits until every member of the spec is a healthy voter.
func waitRecovered(ctx context.Context, w io.Writer, s *spec.Spec, d time.Duration, start time.Time) error {
	if d <= 0 {
		fmt.Fprintln(w, "Not waiting (--wait 0): follow it with etcdkeeper status.")
		return nil
	}
	deadline := time.Now().Add(d)
	last := -1
	for {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		healthy, voters, _ := healthyVoters(cctx, s)
		cancel()
		if healthy != last {
			fmt.Fprintf(w, "  %6.1fs: %d healthy voters of %d (spec: %d members)\n", time.Since(start).Seconds(), healthy, voters, len(s.Members))
			last = healthy
		}
		if healthy == len(s.Members) && voters == len(s.Members) {
			fmt.Fprintf(w, "Recovered: %d healthy voters, %.1fs after recover --yes.\n", healthy, time.Since(start).Seconds())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not recovered after %s: %d of %d members are healthy voters; the agents go on: follow it with etcdkeeper status", d, healthy, len(s.Members))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// healthyVoters counts the cluster's healthy voters and voters, as etcd
// answers (an error when no member answers with a leader).
func healthyVoters(ctx context.Context, s *spec.Spec) (healthy, voters int, err error) {
	cli, err := dialSpec(s)
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	v, err := cli.Observe(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("no member answers with a leader: %w", err)
	}
	voters, healthy = v.Voters(0)
	return healthy, voters, nil
}

// quorumNow is whether a quorum of voters is healthy, as etcd answers.
func quorumNow(ctx context.Context, s *spec.Spec) recovery.QuorumState {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	healthy, voters, err := healthyVoters(octx, s)
	if err != nil {
		return recovery.QuorumState{Detail: err.Error()}
	}
	return recovery.QuorumState{Healthy: healthy >= model.Quorum(voters), Detail: fmt.Sprintf("%d of %d voters healthy", healthy, voters)}
}

func newRecoveryID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// agents reaches each member's agent (the transport: httpapi.Control).
type agents struct {
	s    *spec.Spec
	self spec.Member
	// selfListed: --name (or the host name) is a member of the spec.
	selfListed bool
	ctl        *httpapi.Control
}

func newAgents(s *spec.Spec, name string) (*agents, error) {
	ctl, err := httpapi.NewControl(s, name)
	if err != nil {
		return nil, err
	}
	self, ok := ctl.Self()
	return &agents{s: s, self: self, selfListed: ok, ctl: ctl}, nil
}

// endpoint is where member m's agent serves /recovery: its control socket
// on this host, else agent.recoveryAddr on m's host, else m's agent.addr.
func (ag *agents) endpoint(m spec.Member) string { return ag.ctl.URL(m, "/recovery") }

func (ag *agents) inspectAll(ctx context.Context) []recovery.Inspection {
	out := make([]recovery.Inspection, len(ag.s.Members))
	var wg sync.WaitGroup
	for i, m := range ag.s.Members {
		wg.Go(func() { out[i] = ag.inspect(ctx, m) })
	}
	wg.Wait()
	return out
}

func (ag *agents) inspect(ctx context.Context, m spec.Member) recovery.Inspection {
	bad := func(err error) recovery.Inspection { return recovery.Inspection{Name: m.Name, Error: err.Error()} }
	resp, err := ag.ctl.Get(ctx, m, "/recovery")
	if err != nil {
		return bad(err)
	}
	defer resp.Body.Close()
	var in recovery.Inspection
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&in); err != nil {
		return bad(fmt.Errorf("%s: %s: %w", ag.endpoint(m), resp.Status, err))
	}
	if in.Name != m.Name {
		// agent.addr on loopback reaches this host's own agent.
		return bad(fmt.Errorf("%s answers for %s, not %s", ag.endpoint(m), in.Name, m.Name))
	}
	in.Reachable = true
	return in
}

func (ag *agents) post(ctx context.Context, name string, r recovery.Request) (recovery.Journal, error) {
	m, ok := ag.s.Lookup(name)
	if !ok {
		return recovery.Journal{}, fmt.Errorf("%s is not in the spec", name)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return recovery.Journal{}, err
	}
	resp, err := ag.ctl.Post(ctx, m, "/recovery", body)
	if err != nil {
		return recovery.Journal{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusAccepted {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return recovery.Journal{}, errors.New(e.Error)
		}
		return recovery.Journal{}, fmt.Errorf("%s: %s", ag.endpoint(m), resp.Status)
	}
	var j recovery.Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return recovery.Journal{}, fmt.Errorf("%s: %w", ag.endpoint(m), err)
	}
	return j, nil
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
