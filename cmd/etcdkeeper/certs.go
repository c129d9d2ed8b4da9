package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func certsCmd() *cobra.Command {
	c := &cobra.Command{
		Use: "certs",
		Example: `  etcdkeeper certs status --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper certs renew --config /etc/etcdkeeper/cluster.yaml --ca-key /mnt/usb/etcd-ca.key`,
		Short: "Show the certificates of every member and what renews them; renew them by hand",
		Long: `certs shows, per member, each certificate the spec names (etcd's client and peer
certificates, the agent's, tls.renew.others and the CA): its subject, names,
issuer, expiry, and what renews it. With tls.ca and its key on a host, that
host's agent renews them itself (docs/certificates.md); without the key,
"certs renew --ca-key FILE" renews them once, by hand.`,
	}
	c.AddCommand(certsStatusCmd(), certsRenewCmd(), certsRotateCmd())
	return c
}

func certsStatusCmd() *cobra.Command {
	var path, output string
	c := &cobra.Command{
		Use: "status --config FILE [-o table|json]",
		Example: `  etcdkeeper certs status --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper certs status --config /etc/etcdkeeper/cluster.yaml -o json`,
		Short: "Each member's certificates: role, subject, names, issuer, expiry, what renews them",
		Long: `status reads the certificates of every member whose files are on this host, and
takes those of the other members from their agents' records in the cluster
(each agent publishes where its host's certificates stand). A certificate is
renewed by "the agent, with tls.ca" when this host has the CA's key, else by
nothing, and the line says why.
Exit status: 0 when every certificate is valid and either renewed by an agent
or more than 30 days from its expiry; 2 when one is expired, expires within
30 days with nothing to renew it, or its last renewal failed; 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := loadSpec(c, path)
			if err != nil {
				return err
			}
			now := time.Now()
			rows := certRows(c.Context(), s, now)
			if table, err := printJSON(c.OutOrStdout(), rows, output); !table {
				if err != nil {
					return err
				}
			} else {
				printCertRows(c.OutOrStdout(), rows, now)
			}
			if why := certTrouble(rows, now); why != "" {
				return &exitError{code: 2, err: errors.New(why)}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return c
}

// certRows is where every member's certificates stand: read here for the
// members whose files this host has, from the agents' records for the
// others (none when the cluster cannot be reached).
func certRows(ctx context.Context, s *spec.Spec, now time.Time) []model.CertStatus {
	var rows []model.CertStatus
	seen := map[string]bool{}
	var missing []string
	for _, m := range s.Members {
		r := certs.Renewals(certLeaves(m), m.TLS.RenewCAs(), certs.Options{Before: s.TLS.Renew.Before.Duration, Check: true}, now)
		here := false
		for _, st := range r.Status {
			if !st.Absent {
				here = true
			}
		}
		if !here {
			missing = append(missing, m.Name)
			continue
		}
		for _, st := range r.Status {
			if !seen[st.Path] && !st.Absent {
				seen[st.Path] = true
				st.Member = m.Name
				rows = append(rows, st)
			}
		}
	}
	if len(missing) == 0 {
		return rows
	}
	for _, rec := range agentRecords(ctx, s) {
		for _, name := range missing {
			if rec.Name == name {
				rows = append(rows, rec.Certs...)
			}
		}
	}
	return rows
}

// certLeaves are m's certificates with the CA's at the end (role ca; no
// agent renews a CA: it is rotated).
func certLeaves(m spec.Member) []certs.Leaf {
	ls := m.Leaves()
	if m.TLS.CA.CertFile != "" {
		ls = append(ls, certs.Leaf{Role: "ca", CertFile: m.TLS.CA.CertFile})
	}
	return ls
}

// agentRecords are the agents' records, or none when the cluster cannot
// be reached within a few seconds.
func agentRecords(ctx context.Context, s *spec.Spec) []model.AgentRecord {
	cli, err := dialSpec(s)
	if err != nil {
		return nil
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	recs, _ := cli.Agents(ctx, s.Cluster.Name)
	return recs
}

func printCertRows(w io.Writer, rows []model.CertStatus, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no certificate: the spec names no TLS files, or none is on this host and no agent could be asked")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tSUBJECT\tNAMES\tISSUER\tEXPIRES\tRENEWS\tRENEWED BY\tPATH")
	for _, r := range rows {
		renews := "-"
		if !r.RenewAt.IsZero() {
			renews = r.RenewAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Member, r.Role, dash(r.Subject), dash(r.Names), dash(r.Issuer),
			expiresIn(r.NotAfter, now), renews, r.RenewedBy, r.Path)
	}
	_ = tw.Flush()
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "%s %s: %s\n", r.Member, r.Role, r.Error)
		}
	}
}

func expiresIn(t, now time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case t.Before(now):
		return t.UTC().Format(time.RFC3339) + " (EXPIRED)"
	case t.Sub(now) < 48*time.Hour:
		return t.UTC().Format(time.RFC3339) + " (in " + t.Sub(now).Round(time.Second).String() + ")"
	}
	return fmt.Sprintf("%s (in %d days)", t.UTC().Format(time.RFC3339), certs.Days(t, now))
}

// certTrouble is why certs status exits 2 ("": it does not).
func certTrouble(rows []model.CertStatus, now time.Time) string {
	var why []string
	for _, r := range rows {
		switch {
		case r.Error != "":
			why = append(why, r.Member+" "+r.Role+": "+r.Error)
		case !r.NotAfter.IsZero() && r.NotAfter.Before(now):
			why = append(why, r.Member+" "+r.Role+": expired")
		case r.RenewAt.IsZero() && !r.NotAfter.IsZero() && r.NotAfter.Sub(now) < certs.WarnBefore && r.Role != "ca":
			why = append(why, r.Member+" "+r.Role+": expires within 30 days and nothing renews it")
		}
	}
	return strings.Join(why, "; ")
}

func certsRenewCmd() *cobra.Command {
	var path, name, caCert, caKey string
	var force bool
	c := &cobra.Command{
		Use: "renew --config FILE [--ca-key FILE] [--ca-cert FILE] [--force]",
		Example: `  # on a host without the CA key: bring it for this one renewal
  etcdkeeper certs renew --config /etc/etcdkeeper/cluster.yaml --ca-key /mnt/usb/etcd-ca.key

  # renew every certificate now, due or not
  etcdkeeper certs renew --config /etc/etcdkeeper/cluster.yaml --force`,
		Short: "Renew this host's certificates once, with the CA's key (tls.ca, or --ca-key)",
		Long: `renew renews the certificates of this host's member (--name, or the member this
host runs) that are due (see tls.renew.before), or all of them with --force,
the way the agent does: same subject, names, key usages, lifetime and key,
only the certificate file replaced, in one rename, so that etcd and the agent
use it from their next handshake, without a restart. The CA key is read, never
copied or shown; it must be readable by its owner only.
Exit status: 0 when every renewal asked for was done (or none was due), 1
otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := loadSpec(c, path)
			if err != nil {
				return err
			}
			m, isMember, err := backupMember(s, name)
			if err != nil {
				return err
			}
			if !isMember {
				return fmt.Errorf("this host (%s) runs no member of the spec: pass --name", hostname())
			}
			cas := m.TLS.RenewCAs()
			if caCert != "" {
				cas[0].CertFile = caCert
			}
			if caKey != "" {
				cas[0].KeyFile = caKey
			}
			if cas[0].CertFile == "" {
				return errors.New("no CA: the spec names no tls.ca.certFile: pass --ca-cert")
			}
			r := certs.Renewals(m.Leaves(), cas, certs.Options{Before: s.TLS.Renew.Before.Duration, Force: force}, time.Now())
			return printRenewed(c.OutOrStdout(), m.Name, r)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "the member whose certificates to renew (default: the one this host runs)")
	c.Flags().StringVar(&caCert, "ca-cert", "", "the CA's certificate (default: tls.ca.certFile)")
	c.Flags().StringVar(&caKey, "ca-key", "", "the CA's private key (default: tls.ca.keyFile)")
	c.Flags().BoolVar(&force, "force", false, "renew every certificate the CA issued, due or not")
	return c
}

func printRenewed(w io.Writer, member string, r certs.Round) error {
	for _, d := range r.Renewed {
		fmt.Fprintf(w, "%s %s: renewed, expires %s (was %s)\n", member, d.Role, d.New.NotAfter.UTC().Format(time.RFC3339), d.Old.NotAfter.UTC().Format(time.RFC3339))
	}
	var errs []error
	for _, f := range r.Failed {
		errs = append(errs, fmt.Errorf("%s %s: %w", member, f.Role, f.Err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(r.Renewed) > 0 {
		return nil
	}
	for _, st := range r.Status {
		if st.RenewAt.IsZero() && !st.Absent {
			fmt.Fprintf(w, "%s %s: not renewed: %s\n", member, st.Role, st.RenewedBy)
		}
	}
	if !r.Next.IsZero() {
		fmt.Fprintf(w, "nothing due: the next renewal is at %s (--force renews now)\n", r.Next.UTC().Format(time.RFC3339))
	}
	return nil
}

func certsRotateCmd() *cobra.Command {
	var path, newCA string
	var clientsReady bool
	c := &cobra.Command{
		Use: "rotate-ca --config FILE [--new-ca DIR | --clients-ready]",
		Example: `  # 1. make the new CA (same subject and key type as tls.ca, ten years), on one host
  etcdkeeper certs rotate-ca --config /etc/etcdkeeper/cluster.yaml --new-ca /etc/etcdkeeper/pki/next
  # 2. copy that dir to every host (its key stays 0600), add to the spec on every host:
  #      tls.ca.next: {certFile: /etc/etcdkeeper/pki/next/ca.crt, keyFile: /etc/etcdkeeper/pki/next/ca.key}
  # 3. follow it
  etcdkeeper certs rotate-ca --config /etc/etcdkeeper/cluster.yaml

  # with tls.ca.next.waitForClients: once every member trusts both and the clients were restarted
  etcdkeeper certs rotate-ca --config /etc/etcdkeeper/cluster.yaml --clients-ready`,
		Short: "Rotate the CA with no downtime: make the new CA, follow the rotation, say the clients are ready",
		Long: `A CA rotation starts when the spec names the new CA in tls.ca.next, and runs by
itself in three phases, each read from the certificates on each host, so that it
resumes wherever an agent stopped (docs/certificates.md#ca-rotation):
  1. trust both: each host's trusted CA files get the new CA beside the old, and
     each member restarts once to load them, one at a time (the disruption budget);
  2. reissue: once every member's etcd trusts both, each agent has its host's
     certificates issued by the new CA (same keys, no restart);
  3. drop the old CA: once every member presents only the new CA's certificates,
     the trusted CA files keep only it, and each member restarts once more.
A step that needs the others waits, saying why, while a member is down.
--new-ca DIR makes the new CA (ca.crt, ca.key 0600) from tls.ca's subject and key
type; the key is generated on this host and written only there.
--clients-ready, with tls.ca.next.waitForClients, is said twice: once every member
trusts both, that the clients (restarted: kube-apiserver reads its CA only at start)
trust the new CA, which lets phase 2 run; once every member presents the new CA's
certificates, that the other clients do too, which lets phase 3 drop the old CA.
Without either, it prints each member's phase.
Exit status: 0 when the rotation is done on every member (or none runs), 2 while
it is under way, 1 on error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := loadSpec(c, path)
			if err != nil {
				return err
			}
			switch {
			case newCA != "":
				return makeNewCA(c.OutOrStdout(), s, newCA)
			case clientsReady:
				return sayClientsReady(c.Context(), c.OutOrStdout(), s)
			}
			return printRotation(c.Context(), c.OutOrStdout(), s)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&newCA, "new-ca", "", "make the new CA in this dir (ca.crt, ca.key)")
	c.Flags().BoolVar(&clientsReady, "clients-ready", false, "say the clients trust the new CA (tls.ca.next.waitForClients)")
	return c
}

// hostTLS is the tls: section as this host's member has it ({name}
// expanded), or the first member's on a host that runs none.
func hostTLS(s *spec.Spec) spec.TLS {
	if m, ok := s.ForHost(hostname()); ok {
		return m.TLS
	}
	return s.Members[0].TLS
}

func makeNewCA(w io.Writer, s *spec.Spec, dir string) error {
	ca := hostTLS(s).CA
	if ca.CertFile == "" {
		return errors.New("the spec names no tls.ca.certFile: the new CA copies its subject and key type")
	}
	old, err := certs.Read(ca.CertFile)
	if err != nil {
		return fmt.Errorf("tls.ca.certFile: %w", err)
	}
	certFile, keyFile, err := certs.NewCA(old[0], dir, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "new CA %s: %s and %s (0600)\n", certs.CAIDOf(certFile), certFile, keyFile)
	fmt.Fprintf(w, "next: copy %s to every host (keep the key 0600), then add to the spec on every host:\n", dir)
	fmt.Fprintf(w, "  tls:\n    ca:\n      next:\n        certFile: %s\n        keyFile: %s\n", certFile, keyFile)
	return nil
}

// rotationNow is the new CA's ID, and each member's phase from its
// agent's record ("" for a member without one).
func rotationNow(ctx context.Context, s *spec.Spec) (string, map[string]model.AgentRecord, error) {
	next := hostTLS(s).CA.Next
	if next.CertFile == "" {
		return "", nil, nil
	}
	nextCA, err := certs.Read(next.CertFile)
	if err != nil {
		return "", nil, fmt.Errorf("tls.ca.next.certFile: %w", err)
	}
	recs := map[string]model.AgentRecord{}
	for _, r := range agentRecords(ctx, s) {
		recs[r.Name] = r
	}
	return certs.CAID(nextCA[0]), recs, nil
}

func printRotation(ctx context.Context, w io.Writer, s *spec.Spec) error {
	id, recs, err := rotationNow(ctx, s)
	if err != nil {
		return err
	}
	if id == "" {
		fmt.Fprintln(w, "no CA rotation: the spec names no tls.ca.next")
		return nil
	}
	done := 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MEMBER\tETCD TRUSTS\tFILES TRUST\tISSUED BY\tSTEP\n")
	for _, m := range s.Members {
		r, ok := recs[m.Name]
		if !ok || r.CA == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tno record: its agent is down or not reachable\n", m.Name)
			continue
		}
		step := "-"
		if r.Rotation != nil {
			step = r.Rotation.Step + ": " + r.Rotation.Why
			if r.Rotation.Step == reconcile.RotateDone.String() {
				done++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, caNames(r.CA.Running, id), caNames(r.CA.Files, id), caNames(r.CA.Issuers, id), step)
	}
	_ = tw.Flush()
	if done == len(s.Members) {
		fmt.Fprintf(w, "done: every member trusts and presents only the new CA %s; make it tls.ca (move its files in place or point tls.ca at them) and remove tls.ca.next\n", id)
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("the CA rotation is under way: %d of %d members done", done, len(s.Members))}
}

// caNames shows CA IDs as old/new.
func caNames(ids []string, next string) string {
	var out []string
	for _, id := range ids {
		if id == next {
			out = append(out, "new")
		} else {
			out = append(out, "old "+id)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "+")
}

func sayClientsReady(ctx context.Context, w io.Writer, s *spec.Spec) error {
	id, recs, err := rotationNow(ctx, s)
	if err != nil {
		return err
	}
	if id == "" {
		return errors.New("no CA rotation: the spec names no tls.ca.next")
	}
	// Before the reissue the operator says the clients trust the new CA;
	// once every member presents the new CA's certificates, that the
	// clients do too (the old CA may go).
	certsToo := true
	for _, m := range s.Members {
		r, ok := recs[m.Name]
		if !ok || r.CA == nil || !slices.Contains(r.CA.Running, id) {
			return &exitError{code: 2, err: fmt.Errorf("%s's etcd does not trust the new CA yet: wait until every member trusts both (etcdkeeper certs rotate-ca), restart the clients, then say so", m.Name)}
		}
		if !slices.Equal(r.CA.Issuers, []string{id}) {
			certsToo = false
		}
	}
	cli, err := dialSpec(s)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := cli.PutClientsReady(ctx, s.Cluster.Name, cluster.ClientsReady{CA: id, Certs: certsToo, By: whoAmI(), At: time.Now()}); err != nil {
		return err
	}
	if certsToo {
		fmt.Fprintf(w, "recorded: the clients present certificates of the new CA %s; the agents now drop the old CA\n", id)
	} else {
		fmt.Fprintf(w, "recorded: the clients trust the new CA %s; the agents now have their certificates issued by it (say --clients-ready again once the other clients present certificates of the new CA)\n", id)
	}
	return nil
}

// printRotationLines is status's and plan's word on a CA rotation: each
// member's step, as its agent's record says it (nothing when the spec
// names no tls.ca.next).
func printRotationLines(w io.Writer, s *spec.Spec, recs []model.AgentRecord) {
	if hostTLS(s).CA.Next.CertFile == "" {
		return
	}
	byName := map[string]model.AgentRecord{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	fmt.Fprintln(w, "CA rotation (etcdkeeper certs rotate-ca):")
	for _, m := range s.Members {
		if r, ok := byName[m.Name]; ok && r.Rotation != nil {
			fmt.Fprintf(w, "  %s: %s: %s\n", m.Name, r.Rotation.Step, r.Rotation.Why)
		} else {
			fmt.Fprintf(w, "  %s: no record: its agent is down or not reachable\n", m.Name)
		}
	}
}
