package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
	etcdversion "go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdkeeper/etcdkeeper/internal/etcdproc"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Example: `  etcdkeeper version`,
		Short:   "Print etcdkeeper's version and the version of the etcd built into it",
		Args:    cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintf(c.OutOrStdout(), "etcdkeeper %s\netcd (embedded) %s\ngo %s %s/%s\n", version, etcdversion.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

func validateCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use: "validate --config FILE",
		Example: `  etcdkeeper validate --config /etc/etcdkeeper/cluster.yaml
  # a spec for the new hosts, before it goes onto any of them
  etcdkeeper validate --config ./cluster.yaml`,
		Short: "Check a spec file; print every problem as FILE:LINE: message",
		Long: `validate loads the spec like the agent does and prints every problem it finds,
one per line as FILE:LINE: message. It reads every file the spec names: each
certificate must be readable, match its key, chain to the CA that checks it,
cover the member's URLs and be valid now; one that expires within 30 days is
a warning (FILE:LINE: warning: ...). It exits 0 when the spec is valid (with
or without warnings), 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), err)
				return &exitError{code: 1, err: fmt.Errorf("%s is not valid", path)}
			}
			if expired := s.Warnings.Expired(); len(expired) > 0 {
				fmt.Fprintln(c.ErrOrStderr(), &expired)
				return &exitError{code: 1, err: fmt.Errorf("%s names certificates that are not valid now", path)}
			}
			printWarnings(c.ErrOrStderr(), append(s.Warnings, spec.MemoryWarnings(s, spec.MemTotal())...))
			fmt.Fprintf(c.OutOrStdout(), "%s: valid: cluster %q, %d members (%v)\n", path, s.Cluster.Name, len(s.Members), s.Names())
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "", "the spec file (required)")
	_ = c.MarkFlagRequired("config")
	return c
}

// printWarnings prints what is not wrong yet, as FILE:LINE: warning: ...
func printWarnings(w io.Writer, warns spec.Errors) {
	for _, e := range warns {
		fmt.Fprintf(w, "%s:%d: warning: %s\n", e.File, e.Line, e.Msg)
	}
}

// etcdCmd runs the etcd server built into this binary, so that one
// etcdkeeper binary is all a fresh host needs.
func etcdCmd() *cobra.Command {
	return &cobra.Command{
		Use: "etcd [etcd flags]",
		Example: `  etcdkeeper etcd --version
  etcdkeeper etcd --help`,
		Short:              "Run the etcd server built into etcdkeeper (takes etcd's own flags)",
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			// Started by an agent: end with it (etcdproc.Command.Lifeline).
			etcdproc.WatchLifeline()
			etcdmain.Main(append([]string{"etcd"}, args...))
		},
	}
}
