package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
	wait                                     time.Duration
	bump                                     uint64
}

func recoverCmd() *cobra.Command {
	var f recoverFlags
	c := &cobra.Command{
		Use:   "recover --config FILE [--from NAME | --from-snapshot FILE] [--yes]",
		Short: "Plan or carry out the recovery of a cluster that lost its quorum",
		Long: `recover asks every member's agent (over agent.recoveryAddr, or agent.addr) what
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
	if f.from == "" && f.snapshot == "" {
		return nil
	}
	if f.id != "" {
		return ag.deliver(ctx, w, f, rep)
	}
	var src string
	if f.snapshot != "" {
		src = ag.self.Name
		err = recovery.CheckFromSnapshot(rep.Members, rep.Quorum)
		if err == nil {
			_, _, _, err = backup.Verify(f.snapshot)
			if err != nil {
				err = fmt.Errorf("the snapshot %s does not verify: %w; nothing was changed", f.snapshot, err)
			}
		}
	} else {
		src = f.from
		err = recovery.CheckFrom(rep.Members, f.from, rep.Quorum)
	}
	if err != nil {
		return fmt.Errorf("recovery refused: %w", err)
	}
	if !f.yes {
		fmt.Fprintf(w, "\nWould recover from %s. Nothing was changed: run again with --yes to do it.\n", what(f))
		return nil
	}
	id := newRecoveryID()
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
	missed := ag.fenceOthers(ctx, w, req, rep)
	fmt.Fprintf(w, "  %s: ", src)
	j, err := ag.post(ctx, src, req)
	if err != nil {
		fmt.Fprintln(w, "refused")
		return fmt.Errorf("the source %s refused: %w", src, err)
	}
	fmt.Fprintf(w, "source (step %s)\n", j.Step)
	for _, n := range missed {
		fmt.Fprintf(w, "  %s was not reached: on %s, run: etcdkeeper recover --config %s --from %s --yes --id %s\n", n, n, s.Path, src, id)
	}
	return waitRecovered(ctx, w, s, f.wait, start)
}

func what(f recoverFlags) string {
	if f.snapshot != "" {
		return "the snapshot " + f.snapshot
	}
	return f.from + "'s data"
}

// deliver tells the agents recover could not reach before that recovery
// id is under way (recover --id, run on their hosts in turn).
func (ag *agents) deliver(ctx context.Context, w io.Writer, f recoverFlags, rep planReport) error {
	src := f.from
	if f.snapshot != "" {
		src = ag.self.Name
	}
	req := recovery.Request{ID: f.id, Role: recovery.RoleSource, Source: src}
	found := false
	for _, i := range rep.Members {
		if i.Recovery != nil && i.Recovery.ID == f.id {
			found = true
			req.OldClusterID = i.Recovery.OldClusterID
		}
	}
	if !found {
		// Not known anywhere yet: this host is the first one in turn.
		if src == ag.self.Name {
			if _, err := ag.post(ctx, src, req); err != nil {
				return fmt.Errorf("the source %s refused: %w", src, err)
			}
			fmt.Fprintf(w, "\n%s: source of recovery %s\n", src, f.id)
			return nil
		}
	}
	fmt.Fprintf(w, "\nRecovery %s from %s:\n", f.id, src)
	missed := ag.fenceOthers(ctx, w, req, rep)
	for _, n := range missed {
		fmt.Fprintf(w, "  %s was not reached: run the same command on %s\n", n, n)
	}
	return nil
}

// fenceOthers asks every agent but the source to fence its member; it
// returns the names it could not reach.
func (ag *agents) fenceOthers(ctx context.Context, w io.Writer, src recovery.Request, rep planReport) []string {
	var missed []string
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
		fmt.Fprintf(w, "  %s: fenced (step %s): its old member stays stopped; it rejoins the recovered cluster\n", i.Name, j.Step)
	}
	return missed
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
		healthy, voters := healthyVoters(cctx, s)
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

func healthyVoters(ctx context.Context, s *spec.Spec) (healthy, voters int) {
	cli, err := dialSpec(s)
	if err != nil {
		return 0, 0
	}
	defer cli.Close()
	v, err := cli.Observe(ctx)
	if err != nil {
		return 0, 0
	}
	voters, healthy = v.Voters(0)
	return healthy, voters
}

// quorumNow is whether a quorum of voters is healthy, as etcd answers.
func quorumNow(ctx context.Context, s *spec.Spec) recovery.QuorumState {
	cli, err := dialSpec(s)
	if err != nil {
		return recovery.QuorumState{Detail: err.Error()}
	}
	defer cli.Close()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := cli.Observe(octx)
	if err != nil {
		return recovery.QuorumState{Detail: "no member answers with a leader: " + err.Error()}
	}
	voters, healthy := v.Voters(0)
	return recovery.QuorumState{Healthy: healthy >= model.Quorum(voters), Detail: fmt.Sprintf("%d of %d voters healthy", healthy, voters)}
}

func newRecoveryID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// agents reaches each member's agent endpoint.
type agents struct {
	s    *spec.Spec
	self spec.Member
	http *http.Client
	// scheme is https when the recovery listener uses the peer TLS.
	scheme string
}

func newAgents(s *spec.Spec, name string) (*agents, error) {
	if name == "" {
		name, _ = os.Hostname()
	}
	self, ok := s.Lookup(name)
	if !ok {
		self = s.Members[0]
	}
	ag := &agents{s: s, self: self, scheme: "http"}
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}
	if s.Agent.RecoveryAddr != "" {
		cfg, err := httpapi.RecoveryClientTLS(self.TLS.Peer)
		if err != nil {
			return nil, fmt.Errorf("the peer certificate to call the other agents with: %w", err)
		}
		if cfg != nil {
			tr.TLSClientConfig, ag.scheme = cfg, "https"
		}
	}
	ag.http = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	return ag, nil
}

// endpoint is where member m's agent serves /recovery: agent.recoveryAddr
// on m's host (its peer URL's host when the address binds every IP), else
// m's agent.addr.
func (ag *agents) endpoint(m spec.Member) string {
	if ra := ag.s.Agent.RecoveryAddr; ra != "" {
		host, port, _ := net.SplitHostPort(ra)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if u, err := url.Parse(m.PeerURLs[0]); err == nil {
				host = u.Hostname()
			}
		}
		return ag.scheme + "://" + net.JoinHostPort(host, port) + "/recovery"
	}
	return "http://" + m.AgentAddr + "/recovery"
}

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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ag.endpoint(m), nil)
	if err != nil {
		return bad(err)
	}
	resp, err := ag.http.Do(req)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ag.endpoint(m), bytes.NewReader(body))
	if err != nil {
		return recovery.Journal{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ag.http.Do(req)
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
