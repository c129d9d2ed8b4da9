package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// genDocsCmd writes the man pages and shell completions of the command
// tree, for `make package` (the .deb installs them). Hidden: it is a
// build step, not an operator's command.
func genDocsCmd() *cobra.Command {
	var man, completion string
	c := &cobra.Command{
		Use:     "gen-docs --man DIR --completion DIR",
		Short:   "Write the man pages and the bash, zsh and fish completions (make package)",
		Hidden:  true,
		Args:    cobra.NoArgs,
		Example: `  etcdkeeper gen-docs --man dist/doc/man --completion dist/doc/completion`,
		RunE: func(c *cobra.Command, _ []string) error {
			root := c.Root()
			root.DisableAutoGenTag = true // no build date in the pages: the same tree gives the same files
			if man != "" {
				if err := os.MkdirAll(man, 0o755); err != nil {
					return fmt.Errorf("man pages: %w", err)
				}
				header := &doc.GenManHeader{Title: "ETCDKEEPER", Section: "1", Source: "etcdkeeper " + version, Manual: "etcdkeeper manual"}
				if err := doc.GenManTree(root, header, man); err != nil {
					return fmt.Errorf("man pages in %s: %w", man, err)
				}
			}
			if completion != "" {
				return writeCompletions(root, completion)
			}
			return nil
		},
	}
	c.Flags().StringVar(&man, "man", "", "write a man page per command (etcdkeeper.1, etcdkeeper-status.1, ...) into this dir")
	c.Flags().StringVar(&completion, "completion", "", "write etcdkeeper.bash, _etcdkeeper (zsh) and etcdkeeper.fish into this dir")
	return c
}

func writeCompletions(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("completions: %w", err)
	}
	for name, gen := range map[string]func(*os.File) error{
		"etcdkeeper.bash": func(f *os.File) error { return root.GenBashCompletionV2(f, true) },
		"_etcdkeeper":     func(f *os.File) error { return root.GenZshCompletion(f) },
		"etcdkeeper.fish": func(f *os.File) error { return root.GenFishCompletion(f, true) },
	} {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("completion: %w", err)
		}
		err = gen(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("completion %s: %w", path, err)
		}
	}
	return nil
}
