package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func statusCmd() *cobra.Command {
	var path, output string
	var quiet bool
	c := &cobra.Command{
		Use: "status --config FILE [-o table|json]",
		Example: `  etcdkeeper status --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper status --config /etc/etcdkeeper/cluster.yaml -o json

  # in a script: exit 0 only when every member is a healthy voter, the membership is the spec's and no alarm is raised
  etcdkeeper status --config /etc/etcdkeeper/cluster.yaml -q && echo healthy`,
		Short: "Show the whole cluster at a glance: spec members next to live members",
		Long: `status joins the spec with the live cluster: for each member its ID, health,
role, raft term and index, db size and etcd version, and whether it is in the
spec. Members that are down are shown as down; every call has a deadline.
Below the table, the certificate that expires first among those the spec
names, as this host's files say (on kubeadm hosts each host has its own).
Exit status: 0 when every spec member is a healthy voter, nothing else is in
the cluster and no alarm is raised, 2 when the cluster differs from the spec
or an alarm is raised (NOSPACE: etcd refuses writes), 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), err)
				return fmt.Errorf("%s is not valid", path)
			}
			rows, maintenance, converged, alarmed, err := clusterRows(c.Context(), s)
			if err != nil {
				return err
			}
			if !converged {
				addRecoveries(c.Context(), s, rows)
			}
			if !quiet {
				if err := printRows(c.OutOrStdout(), rows, output); err != nil {
					return err
				}
				if output == "table" {
					printRecoveries(c.OutOrStdout(), rows)
					for _, l := range maintenance {
						fmt.Fprintln(c.OutOrStdout(), l)
					}
					printPaused(c.OutOrStdout(), rows)
					printTurnLines(c.Context(), c.OutOrStdout(), s)
					fmt.Fprintln(c.OutOrStdout(), certSummary(memberCerts(s), time.Now()))
					printBackupLines(c.OutOrStdout(), agentRecords(c.Context(), s))
					if l := renewSummary(s); l != "" {
						fmt.Fprintln(c.OutOrStdout(), l)
					}
					if hostTLS(s).CA.Next.CertFile != "" {
						printRotationLines(c.OutOrStdout(), s, agentRecords(c.Context(), s))
					}
				}
			}
			if !converged {
				return &exitError{code: 2, err: fmt.Errorf("the cluster differs from the spec")}
			}
			if alarmed {
				return &exitError{code: 2, err: fmt.Errorf("an alarm is raised")}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing; only the exit status")
	return c
}

// statusRow is one member: in the spec, in the cluster, or both.
type statusRow struct {
	Name      string `json:"name"`
	ID        string `json:"id,omitempty"`
	InSpec    bool   `json:"inSpec"`
	InCluster bool   `json:"inCluster"`
	Role      string `json:"role"`
	Health    string `json:"health"`
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	DBSize    int64  `json:"dbSize,omitempty"`
	DBInUse   int64  `json:"dbSizeInUse,omitempty"`
	Quota     int64  `json:"quota,omitempty"`
	Version   string `json:"version,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Decision  string `json:"decision,omitempty"`
	Paused    bool   `json:"paused,omitempty"`
	Note      string `json:"note,omitempty"`
	// Recovery is the member's part in a recovery from quorum loss under
	// way: "<id> <role> <step>".
	Recovery string `json:"recovery,omitempty"`
	// WALFsyncP99 is the member's WAL fsync p99 over the last 30 s, as its
	// agent measured it (0: not known); SlowDisk, that the agents' rule
	// finds it far slower than the others' (leadership is kept off it);
	// LeaderTag the spec's leader: for it (prefer, avoid).
	WALFsyncP99 time.Duration `json:"walFsyncP99,omitempty"`
	SlowDisk    bool          `json:"slowDisk,omitempty"`
	LeaderTag   string        `json:"leaderTag,omitempty"`
}

// clusterRows is the table, the lines below it, whether the membership is
// the spec's, and whether an alarm is raised (NOSPACE: writes refused).
func clusterRows(ctx context.Context, s *spec.Spec) ([]statusRow, []string, bool, bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	cli, err := dialSpec(s)
	if err != nil {
		return nil, nil, false, false, err
	}
	defer cli.Close()
	view, err := cli.Observe(ctx)
	if err != nil {
		return noQuorumRows(ctx, cli, s, err), nil, false, false, nil
	}
	rows, converged, err := joinRows(s, view)
	recs, aerr := cli.Agents(ctx, s.Cluster.Name)
	if aerr == nil {
		addAgents(rows, recs)
	}
	lines := addDisks(rows, s, model.NewView(view, recs))
	return rows, append(lines, maintenanceLines(s, view, recs)...), converged, len(view.Alarms) > 0, err
}

// maintenanceLines say what maintenance runs (the agents' records) and
// what the agents' rule would do next, or why it waits.
func maintenanceLines(s *spec.Spec, v model.Cluster, recs []model.AgentRecord) []string {
	var out []string
	if r := reconcile.RolloutText(v, recs); r != "" {
		out = append(out, r)
	}
	for _, r := range recs {
		if r.Maintenance != "" {
			out = append(out, fmt.Sprintf("maintenance running: agent %s is %s", r.Name, r.Maintenance))
		}
	}
	if ns := noSpaceText(s, v); ns != "" {
		return append(out, ns)
	}
	step := reconcile.PlanMaintenance(s.Members, v, recs, reconcile.DefragPolicyOf(s.Maintenance.Defrag))
	switch step.Kind {
	case reconcile.StepNone:
		out = append(out, "maintenance: "+step.Reason)
	case reconcile.StepWait:
		out = append(out, "maintenance pending: "+step.Reason)
	case reconcile.StepDefragOffline:
		out = append(out, fmt.Sprintf("maintenance pending: %s (%s's own agent does it)", step.Reason, step.Name))
	default:
		out = append(out, fmt.Sprintf("maintenance pending: %s (the agent that takes the cluster lock next does it)", step.Reason))
	}
	return out
}

// noSpaceText says where the agents' NOSPACE procedure stands, or "" when
// no NOSPACE alarm is raised. The revision is the agents' to compare (0,
// 0: no compaction step): what it shows is whether the procedure can go
// on, or why not. A command has no memory of how long NOSPACE lasts: it
// takes a member's data in use at the line as the agents do once they
// compacted (reconcile.NoSpaceSettle), which at the first seconds of a
// NOSPACE may still count history the compaction frees.
func noSpaceText(s *spec.Spec, v model.Cluster) string {
	pol := reconcile.NoSpacePolicyOf(s)
	pol.RaisedFor = reconcile.NoSpaceSettle
	switch ns := reconcile.PlanNoSpace(s.Members, v, 0, 0, nil, pol, time.Now()); ns.Kind {
	case reconcile.StepNone:
		return ""
	case reconcile.StepFull:
		return "NOSPACE STAYS RAISED: " + ns.Reason
	case reconcile.StepWait:
		return "NOSPACE: " + ns.Reason
	default:
		return fmt.Sprintf("NOSPACE: the agents are on it (the leader's agent, without the cluster lock): next: %s", ns.Reason)
	}
}

// noQuorumRows asks each spec member by itself when the cluster as a
// whole does not answer, so that the table still shows who is up.
func noQuorumRows(ctx context.Context, cli *cluster.Client, s *spec.Spec, cause error) []statusRow {
	rows := make([]statusRow, len(s.Members))
	var wg sync.WaitGroup
	for i, m := range s.Members {
		rows[i] = statusRow{Name: m.Name, InSpec: true, Role: "?", Health: "down", Endpoint: m.ClientURLs[0]}
		wg.Add(1)
		go func(r *statusRow) {
			defer wg.Done()
			st, err := cli.Status(ctx, r.Endpoint)
			if err != nil {
				r.Note = err.Error()
				return
			}
			r.ID, r.RaftTerm, r.RaftIndex, r.DBSize, r.Version = fmt.Sprintf("%x", st.Header.MemberId), st.RaftTerm, st.RaftIndex, st.DbSize, st.Version
			r.Health, r.Note = "up, no leader", "no quorum: "+cause.Error()
		}(&rows[i])
	}
	wg.Wait()
	return rows
}

// addRecoveries asks the agents (as recover does) for a recovery under
// way: while the cluster has no quorum, etcd cannot tell.
func addRecoveries(ctx context.Context, s *spec.Spec, rows []statusRow) {
	if ctx == nil {
		ctx = context.Background()
	}
	ag, err := newAgents(s, "")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	by := map[string]*recovery.Journal{}
	for _, in := range ag.inspectAll(ctx, 10*time.Second) {
		if in.Recovery != nil && in.Recovery.Open() {
			by[in.Name] = in.Recovery
		}
	}
	for i := range rows {
		if j, ok := by[rows[i].Name]; ok {
			rows[i].Recovery = fmt.Sprintf("%s %s %s", j.ID, j.Role, j.Step)
			if recovery.FenceStale(j, time.Now()) {
				rows[i].Recovery += fmt.Sprintf(" (STALE: fenced %s ago and its source %s has not started: start it, or etcdkeeper recover --abort %s)",
					time.Since(j.StartedAt).Round(time.Second), j.Source, j.ID)
			}
		}
	}
}

func printRecoveries(w io.Writer, rows []statusRow) {
	for _, r := range rows {
		if r.Recovery != "" {
			fmt.Fprintf(w, "Recovery in progress on %s: %s\n", r.Name, r.Recovery)
		}
	}
}

// addAgents shows each agent's own account next to its member.
func addAgents(rows []statusRow, recs []model.AgentRecord) {
	by := map[string]model.AgentRecord{}
	for _, r := range recs {
		by[r.Name] = r
	}
	for i := range rows {
		if r, ok := by[rows[i].Name]; ok {
			rows[i].Agent, rows[i].Decision, rows[i].Paused = r.Phase, r.Decision, r.Paused
		} else if rows[i].Name != "" {
			rows[i].Agent = "no agent"
		}
	}
}

// addDisks fills in what the agents measured of each member's disk and
// the spec's leader tags, and returns a line per slow disk.
func addDisks(rows []statusRow, s *spec.Spec, v model.View) []string {
	tags := map[string]string{}
	for _, m := range s.Members {
		tags[m.Name] = m.Leader
	}
	var lines []string
	for i := range rows {
		rows[i].LeaderTag = tags[rows[i].Name]
		id, err := strconv.ParseUint(rows[i].ID, 16, 64)
		if err != nil {
			continue
		}
		rows[i].WALFsyncP99 = v.DiskP99(id)
		if sd, ok := v.SlowDisk(id); ok {
			rows[i].SlowDisk = true
			lines = append(lines, "SLOW DISK: "+sd.Text()+": leadership is kept off it (docs/hosts.md, \"A slow disk\")")
		}
	}
	return lines
}

// disk is the DISK column: the WAL fsync p99, SLOW when the rule says so,
// and the leader tag.
func disk(r statusRow) string {
	var parts []string
	switch {
	case r.SlowDisk:
		parts = append(parts, "SLOW "+model.Latency(r.WALFsyncP99).String())
	case r.WALFsyncP99 > 0:
		parts = append(parts, model.Latency(r.WALFsyncP99).String())
	}
	if r.LeaderTag != "" {
		parts = append(parts, "leader:"+r.LeaderTag)
	}
	return dash(strings.Join(parts, " "))
}

// joinRows is one row per live member and per missing spec member. The
// spec and the cluster are matched, and their differences found, by the
// same reconcile.Diff that plan prints and the agents act on: status and
// plan cannot disagree.
func joinRows(s *spec.Spec, v model.Cluster) ([]statusRow, bool, error) {
	diff := reconcile.Diff(s.Members, v)
	notes := map[uint64][]string{}
	for _, d := range diff {
		if d.MemberID != 0 && d.Kind != reconcile.DiffUnhealthy {
			notes[d.MemberID] = append(notes[d.MemberID], d.Detail)
		}
	}
	live, missing := reconcile.Matches(s.Members, v)
	var rows []statusRow
	for _, m := range live {
		r := statusRow{Name: m.Label, ID: fmt.Sprintf("%x", m.ID), InSpec: m.Spec != nil, InCluster: true, RaftTerm: m.RaftTerm,
			RaftIndex: m.RaftIndex, DBSize: m.DBSize, DBInUse: m.DBSizeInUse, Quota: m.Quota, Version: m.Version, Role: role(v, m.Member), Health: "healthy"}
		if !m.Healthy {
			r.Health = "down"
			if m.Err != "" {
				notes[m.ID] = append([]string{m.Err}, notes[m.ID]...)
			}
		}
		if len(m.ClientURLs) > 0 {
			r.Endpoint = m.ClientURLs[0]
		}
		r.Note = strings.Join(notes[m.ID], "; ")
		rows = append(rows, r)
	}
	for _, m := range missing {
		rows = append(rows, statusRow{Name: m.Name, InSpec: true, Role: "-", Health: "absent", Endpoint: m.ClientURLs[0],
			Note: "in the spec, not a member yet: its agent joins it"})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, len(diff) == 0, nil
}

func role(v model.Cluster, m model.Member) string {
	switch {
	case m.Unstarted():
		return "unstarted"
	case m.IsLearner:
		return "learner"
	case m.ID == v.LeaderID:
		return "leader"
	default:
		return "voter"
	}
}

// printJSON prints v as indented JSON for -o json and reports table for
// -o table, which the caller prints; any other -o is an error.
func printJSON(w io.Writer, v any, output string) (table bool, err error) {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return false, enc.Encode(v)
	case "table":
		return true, nil
	}
	return false, fmt.Errorf("-o %q: use table or json", output)
}

func printRows(w io.Writer, rows []statusRow, output string) error {
	if table, err := printJSON(w, rows, output); !table {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tROLE\tHEALTH\tTERM\tINDEX\tDB SIZE\tFREE\tQUOTA\tVERSION\tDISK\tIN SPEC\tAGENT\tENDPOINT\tNOTE")
	for _, r := range rows {
		name := r.Name
		if name == "" {
			name = "(unstarted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.ID, r.Role, r.Health, r.RaftTerm, r.RaftIndex, size(r.DBSize), free(r.DBSize, r.DBInUse), size(r.Quota), r.Version, disk(r), yesNo(r.InSpec), dash(r.Agent), r.Endpoint, r.Note)
	}
	return tw.Flush()
}

func size(n int64) string {
	if n == 0 {
		return "-"
	}
	return reconcile.FmtBytes(n)
}

// free is the free share of a db file: what a defragmentation gives back.
func free(size, inUse int64) string {
	if size <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(max(0, size-inUse))/float64(size))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// memberCert is one certificate file of a member and its expiry.
type memberCert struct {
	Member string
	certs.Expiry
}

// memberCerts reads the expiry of every certificate file the spec names,
// per member ({name} paths differ), each path once.
func memberCerts(s *spec.Spec) []memberCert {
	var out []memberCert
	seen := map[string]bool{}
	for _, m := range s.Members {
		for _, e := range certs.Expiries(m.TLS.CertFiles()) {
			if !seen[e.Path] {
				seen[e.Path] = true
				out = append(out, memberCert{Member: m.Name, Expiry: e})
			}
		}
	}
	return out
}

// renewSummary says what renews the certificates on this host ("" when the
// spec names none).
func renewSummary(s *spec.Spec) string {
	if len(memberCerts(s)) == 0 {
		return ""
	}
	ca := hostTLS(s).RenewCAs()[0]
	switch {
	case ca.CertFile == "":
		return "renewal: nothing renews them: the spec names no tls.ca (docs/certificates.md)"
	case ca.KeyFile == "":
		return "renewal: nothing renews them: the spec names no tls.ca.keyFile (etcdkeeper certs renew --ca-key FILE renews by hand)"
	}
	if _, err := certs.LoadIssuer(ca.CertFile, ca.KeyFile); err != nil {
		return "renewal: this host's agent renews nothing: " + err.Error() + " (etcdkeeper certs status)"
	}
	return "renewal: this host's agent renews them with tls.ca before they expire (etcdkeeper certs status)"
}

// certSummary is status's line about certificates: the nearest expiry,
// and how many files could not be read.
func certSummary(mc []memberCert, now time.Time) string {
	if len(mc) == 0 {
		return "certificates: none (the spec names no TLS files)"
	}
	var best *memberCert
	unreadable := 0
	for i := range mc {
		switch {
		case mc[i].Err != nil:
			unreadable++
		case best == nil || mc[i].NotAfter.Before(best.NotAfter):
			best = &mc[i]
		}
	}
	line := "certificates: "
	if best != nil {
		when := fmt.Sprintf("in %d days", certs.Days(best.NotAfter, now))
		if best.NotAfter.Before(now) {
			when = fmt.Sprintf("EXPIRED %d days ago", -certs.Days(best.NotAfter, now))
		} else if best.NotAfter.Sub(now) < certs.WarnBefore {
			when = "RENEW: " + when
		}
		line += fmt.Sprintf("nearest expiry %s (%s): %s %s of %s", best.NotAfter.UTC().Format("2006-01-02"), when, best.Kind, best.Path, best.Member)
	}
	if unreadable > 0 {
		if best != nil {
			line += "; "
		}
		line += fmt.Sprintf("%d of %d files not readable here (etcdkeeper validate says why)", unreadable, len(mc))
	}
	return line
}

// printBackupLines shows each agent's snapshot encryption and its last
// restore drill: the recovery time a restore from its newest snapshot
// takes on its host.
func printBackupLines(w io.Writer, recs []model.AgentRecord) {
	for _, r := range recs {
		if r.Backup != "" {
			fmt.Fprintf(w, "backups of %s: %s\n", r.Name, r.Backup)
		}
		if r.RestoreDrill != "" {
			fmt.Fprintf(w, "restore drill of %s: %s\n", r.Name, r.RestoreDrill)
		}
	}
}
