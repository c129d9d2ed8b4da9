// Command etcdkeeper is a per-host agent that runs, supervises and repairs
// one member of an etcd cluster from a YAML spec shared by all hosts.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		// An exitError's outcome was already printed by its command.
		if _, ok := errors.AsType[*exitError](err); !ok {
			report(err)
		}
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status (e.g. `plan` exits 2 when
// changes are pending).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	return 1
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "etcdkeeper",
		Short: "A per-host agent that keeps an etcd cluster on plain hosts healthy",
		Long: `etcdkeeper runs one etcd member per host from a YAML spec that all hosts share.
It starts and supervises the local etcd, joins it to the cluster (as a learner,
then promoted), follows the spec's member list, and repairs its member when the
data is corrupt: remove, move the data aside (kept), re-add, resync from the leader.
It never takes an action that loses quorum.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCmd(), statusCmd(), planCmd(), historyCmd(), defragCmd(), leaderCmd(), pauseCmd(), resumeCmd(), validateCmd(), inspectCmd(), backupCmd(), certsCmd(), guardCmd(), maintenanceCmd(), recoverCmd(), versionCmd(), etcdCmd(), importCmd(), genDocsCmd())
	root.SetErr(os.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nsee '%s --help'", err, c.CommandPath())
	})
	return root
}

func init() {
	cobra.EnableCommandSorting = false
}

// report prints an error the way the command line shows it.
func report(err error) {
	fmt.Fprintln(os.Stderr, "etcdkeeper:", err)
}
