package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

func inspectCmd() *cobra.Command {
	var dir, output string
	c := &cobra.Command{
		Use: "inspect --data-dir DIR [-o text|json]",
		Example: `  # on a host whose etcd is stopped (systemctl stop etcdkeeper)
  etcdkeeper inspect --data-dir /var/lib/etcd/node1
  etcdkeeper inspect --data-dir /var/lib/etcd/node1 -o json`,
		Short: "Check an etcd data dir offline with etcd's own WAL and bbolt code",
		Long: `inspect verifies a stopped member's data dir without starting etcd: the WAL
(CRC, snapshot records, metadata), the bbolt db (page check) and that they agree.
It reads only. States: missing, empty, healthy, torn-tail (etcd repairs it
itself), locked (a running etcd holds it), unreadable (permissions), corrupt.
Exit status: 0 unless the dir is corrupt (3) or unreadable (4).
The agent runs this in a child process, so that a damaged db page that crashes
bbolt cannot take the agent down.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r := repair.Inspect(nil, dir)
			switch output {
			case "json":
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), string(b))
			default:
				fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", dir, r.State)
				if r.Reason != "" {
					fmt.Fprintf(c.OutOrStdout(), "  reason: %s\n", r.Reason)
				}
				if r.MemberID != 0 {
					fmt.Fprintf(c.OutOrStdout(), "  member %x of cluster %x, db %d bytes\n", r.MemberID, r.ClusterID, r.DBSize)
				}
			}
			switch r.State {
			case repair.DirCorrupt:
				return &exitError{code: 3, err: fmt.Errorf("corrupt")}
			case repair.DirUnreadable:
				return &exitError{code: 4, err: fmt.Errorf("unreadable")}
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "data-dir", "", "the member's data dir (required)")
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	_ = c.MarkFlagRequired("data-dir")
	return c
}
