package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func backupCmd() *cobra.Command {
	c := &cobra.Command{
		Use: "backup",
		Example: `  etcdkeeper backup save --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper backup list --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper backup drill --config /etc/etcdkeeper/cluster.yaml`,
		Short: "Take a verified snapshot now, list the snapshots on this host, or time a restore drill",
		Long: `The agents take verified snapshots on the schedule of the spec's backup: section
(every host its own copy, in backup.dir). backup save takes one now; backup list
shows them (and which key reads each). backup drill restores the newest into a
scratch dir, offline, and times it. Snapshots saved by hand are never deleted
by the agents' retention.`,
	}
	c.AddCommand(backupSaveCmd(), backupListCmd(), backupDrillCmd(), backupKeygenCmd())
	return c
}

// backupMember is the member a backup command acts for: --name, or the
// member this host runs (spec.ForHost); isMember is false on a host that
// runs none.
func backupMember(s *spec.Spec, name string) (m spec.Member, isMember bool, err error) {
	if name == "" {
		m, ok := s.ForHost(hostname())
		return m, ok, nil
	}
	m, ok := s.Lookup(name)
	if !ok {
		return spec.Member{}, false, fmt.Errorf("--name %q is not a member of the spec (members: %v)", name, s.Names())
	}
	return m, true, nil
}

func backupSaveCmd() *cobra.Command {
	var path, name, out string
	c := &cobra.Command{
		Use: "save --config FILE [--out DIR]",
		Example: `  # one verified snapshot now, into this host's member's backup.dir (kept until you delete it)
  etcdkeeper backup save --config /etc/etcdkeeper/cluster.yaml

  # from a host that runs no member
  etcdkeeper backup save --config /etc/etcdkeeper/cluster.yaml --out /srv/etcd-snapshots`,
		Short: "Take one snapshot now from a healthy member, verify it, keep it in DIR or backup.dir",
		Long: `save takes one snapshot through etcd's maintenance API from a healthy member (this
host's own when it is a follower, else a follower, else the leader; on a host
that runs no member, any healthy one: it is a client call), verifies it like
etcdutl snapshot status (bbolt check, hash, revision, key count, etcd's appended
sha256) and keeps it as <cluster>-<UTC time>-rev<revision>.db with a sidecar
.json, in DIR, else this host's member's backup.dir, else (a host that runs no
member) the backup.dir all members share. It is never deleted by the agents'
retention.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				return err
			}
			m, isMember, err := backupMember(s, name)
			if err != nil {
				return err
			}
			dir, err := backup.SaveDir(s, out, m, isMember)
			if err != nil {
				return err
			}
			dial := dialSpec
			if isMember {
				dial = func(s *spec.Spec) (*cluster.Client, error) { return dialAs(s, m) }
			}
			client, err := dial(s)
			if err != nil {
				return err
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(c.Context(), 15*time.Minute)
			defer cancel()
			k, err := backup.KeysFor(s.Backup.Encryption)
			if err != nil {
				return err
			}
			if k.Unacknowledged {
				fmt.Fprintln(c.ErrOrStderr(), "warning: the spec gives no backup.encryption.recipients: this snapshot is PLAINTEXT (the whole keyspace readable in the file)")
			}
			// Member "" (a host that runs none): no local member to prefer.
			t := backup.Taker{Client: client, Cluster: s.Cluster.Name, Member: m.Name, Dir: dir, By: backup.ByHand, Keys: k}
			e, err := t.Take(ctx)
			if err != nil {
				return err
			}
			sc := e.Sidecar
			fmt.Fprintf(c.OutOrStdout(), "%s: verified: revision %d, %d keys, %d bytes, sha256 %s, from %s (%s), %.2fs, key: %s\n",
				e.Path(), e.Revision, sc.Verification.TotalKey, e.Size, sc.SHA256, sc.Source.Name, sc.Source.Role, sc.Seconds, keyOf(sc))
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "the member this host runs (default: the member named like the host, or like its first label)")
	c.Flags().StringVar(&out, "out", "", "the dir to keep it in (default: backup.dir)")
	return c
}

func backupListCmd() *cobra.Command {
	var path, name, dir, output string
	c := &cobra.Command{
		Use: "list --config FILE [-o table|json]",
		Example: `  etcdkeeper backup list --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper backup list --config /etc/etcdkeeper/cluster.yaml --name node2 -o json
  etcdkeeper backup list --config /etc/etcdkeeper/cluster.yaml --dir /srv/etcd-snapshots`,
		Short: "List the snapshots on this host (every member's backup.dir, or --name's, or --dir), newest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				return err
			}
			dirs := backup.SnapshotDirs(s)
			switch {
			case dir != "":
				dirs = []string{dir}
			case name != "":
				m, _, err := backupMember(s, name)
				if err != nil {
					return err
				}
				dirs = []string{m.SnapshotDir}
			}
			entries, warnings, err := backup.ListDirs(dirs, s.Cluster.Name)
			for _, w := range warnings {
				fmt.Fprintf(c.ErrOrStderr(), "warning: %v: its snapshots count for nothing\n", w)
			}
			if err != nil {
				return err
			}
			return printBackups(c.OutOrStdout(), entries, output)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "list only this member's backup.dir (default: every member's)")
	c.Flags().StringVar(&dir, "dir", "", "the dir to list (default: every member's backup.dir)")
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return c
}

func printBackups(w io.Writer, entries []backup.Entry, output string) error {
	if entries == nil {
		entries = []backup.Entry{} // [] in JSON, not null
	}
	if table, err := printJSON(w, entries, output); !table {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tTIME\tREVISION\tKEYS\tSIZE\tVERIFIED\tBY\tKEY\tWHERE")
	for _, e := range entries {
		keys, verified, by, key, where := "-", "no", "-", "-", e.Dir
		if sc := e.Sidecar; sc != nil {
			keys, by, key = fmt.Sprint(sc.Verification.TotalKey), sc.By, keyOf(sc)
			if sc.Member != "" {
				by += " (" + sc.Member + ")"
			}
			switch {
			case e.Distrust != "":
				verified = "no: " + e.Distrust
			case e.Verified():
				verified = "yes"
			}
			switch rc := sc.RestoreCheck; {
			case rc != nil && rc.OK && rc.Checked == backup.CheckedSHA256:
				verified += ", sha256 checked (no identity here)"
			case rc != nil && rc.OK && rc.Checked == backup.CheckedDecrypt:
				verified += ", decrypted (too large to restore in memory)"
			case rc != nil && rc.OK:
				verified += ", restored"
			case rc != nil:
				verified += ", restore FAILED"
			}
			if sc.Uploaded != "" {
				where += ", " + sc.Uploaded
			}
		} else if e.SidecarErr != "" {
			verified = "no: " + e.SidecarErr
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", e.File, e.Time.Format(time.RFC3339), e.Revision, keys, e.Size, verified, by, key, where)
	}
	return tw.Flush()
}

// keyOf says which keys read a snapshot: its age recipients, shortened
// (-o json has them whole), or plaintext.
func keyOf(sc *backup.Sidecar) string {
	if sc.Encryption == nil {
		return "plaintext"
	}
	return strings.Join(backup.ShortKeys(sc.Encryption.Recipients), ",")
}

func backupDrillCmd() *cobra.Command {
	var path, name, dir, output string
	var local bool
	c := &cobra.Command{
		Use: "drill --config FILE [--local] [-o table|json]",
		Example: `  # the newest snapshot in the bucket (or, without s3:, this host's), restored offline, timed
  sudo -u etcdkeeper etcdkeeper backup drill --config /etc/etcdkeeper/cluster.yaml

  # this host's newest, even with s3: set
  etcdkeeper backup drill --config /etc/etcdkeeper/cluster.yaml --local`,
		Short: "Restore the newest snapshot into a scratch dir, offline, and time it end to end",
		Long: `drill does what the agents' scheduled restore drill does (backup.drillInterval),
now, on this host: it takes the newest verified snapshot of the cluster from the
bucket of backup.s3 (else, or with --local, from this host's member's backup.dir,
or --dir), downloads it into a scratch dir (0700) in that backup.dir, decrypts it
with backup.encryption.identityFile (0600, readable by the agent's user only:
run it as that user or root), verifies it as etcdutl snapshot status does,
restores it with etcdutl's code and opens etcd's store on the result, offline
(no port, no socket); then it removes the scratch dir. An encrypted snapshot's
plaintext and its restored data dir live in memory only (/dev/shm, 0700). It prints each step's time
and the total, the recovery time a restore from this snapshot needs here.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				return err
			}
			m, isMember, err := backupMember(s, name)
			if err != nil {
				return err
			}
			if dir == "" {
				if dir, err = backup.SaveDir(s, "", m, isMember); err != nil {
					return err
				}
			}
			k := backup.KeysToRead(s.Backup.Encryption)
			if k.Refused != nil {
				fmt.Fprintf(c.ErrOrStderr(), "warning: %v: this host reads snapshots but takes no new one until that is put right\n", k.Refused)
			}
			plan := backup.DrillPlan{Cluster: s.Cluster.Name, Dir: dir, S3: s.Backup.S3, Keys: k}
			if local {
				plan.S3 = spec.S3{}
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Minute)
			defer cancel()
			d := backup.RunDrill(ctx, plan)
			if table, err := printJSON(c.OutOrStdout(), d, output); !table {
				if err == nil && !d.OK {
					err = fmt.Errorf("restore drill failed: %s", d.Error)
				}
				return err
			}
			printDrill(c.OutOrStdout(), d)
			if !d.OK {
				return fmt.Errorf("restore drill failed: %s", d.Error)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVar(&name, "name", "", "the member this host runs (default: the member named like the host)")
	c.Flags().StringVar(&dir, "dir", "", "the backup dir to drill from and in (default: this member's backup.dir)")
	c.Flags().BoolVar(&local, "local", false, "drill this host's newest snapshot even when backup.s3 is set")
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return c
}

func printDrill(w io.Writer, d backup.Drill) {
	enc := "plaintext"
	if d.Encrypted {
		enc = "encrypted"
	}
	if d.Source != "" {
		fmt.Fprintf(w, "snapshot:  %s (%s, %d bytes)\n", d.Source, enc, d.Bytes)
	}
	if d.Steps.Streamed {
		// One pass: the parts add up to it; the larger one limits it.
		fmt.Fprintf(w, "download+decrypt: %6.2fs in one pass:\n  download: %6.2fs waiting on the bucket\n  decrypt:  %6.2fs more\n", d.Steps.Download+d.Steps.Decrypt, d.Steps.Download, d.Steps.Decrypt)
	} else {
		fmt.Fprintf(w, "download:  %6.2fs\ndecrypt:   %6.2fs\n", d.Steps.Download, d.Steps.Decrypt)
	}
	fmt.Fprintf(w, "verify:    %6.2fs\nrestore:   %6.2fs\n", d.Steps.Verify, d.Steps.Restore)
	fmt.Fprintf(w, "total:     %6.2fs (%.0f MB/s)\n", d.Seconds, d.MBPerSecond())
	if d.OK {
		fmt.Fprintf(w, "restored:  revision %d, %d keys, as the snapshot recorded\n", d.Revision, d.Keys)
	}
}

func backupKeygenCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use: "keygen --out FILE",
		Example: `  # on the host (or in the vault) that keeps the key that restores
  etcdkeeper backup keygen --out /etc/etcdkeeper/backup.key
  # then, in the spec: backup.encryption.recipients: [the age1... it prints]
  # (or a line of backup.encryption.recipientsFile on every host)`,
		Short: "Make an age identity file (0600) for backup.encryption and print its recipient",
		Long: `keygen makes a new age X25519 identity, writes it to FILE (0600, never over an
existing file) and prints its recipient (age1...), which goes into the spec's
backup.encryption.recipients (or a line of backup.encryption.recipientsFile).
The identity file is what restores: keep a copy
away from the cluster (the snapshots are useless without it), and put it, as
backup.encryption.identityFile, only on the hosts that restore or drill (mode
0600, owned by the agent's user). The same file as age-keygen writes.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out FILE is required: where the identity (the secret key) goes")
			}
			r, err := backup.NewIdentityFile(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s\n", r)
			fmt.Fprintf(c.ErrOrStderr(), "identity written to %s (0600); its recipient above goes into backup.encryption.recipients\n", out)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "the identity file to write (0600; refused when it exists)")
	return c
}
