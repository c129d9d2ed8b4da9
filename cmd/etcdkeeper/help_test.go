package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample: `etcdkeeper COMMAND --help` shows how to
// use each command, and every example's command and flags exist.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("%s has no Example", sub.CommandPath())
			}
			for _, line := range strings.Split(sub.Example, "\n") {
				if cmdLine, ok := commandLine(line); ok {
					checked++
					if err := parses(cmdLine); err != nil {
						t.Errorf("%s: example %q: %v", sub.CommandPath(), strings.TrimSpace(line), err)
					}
				}
			}
			walk(sub)
		}
	}
	walk(rootCmd())
	if checked < 15 {
		t.Errorf("only %d example command lines checked", checked)
	}
}

// TestManualCommandsExist: every etcdkeeper command line in the manual's
// shell blocks (```sh) names a command that exists, with flags it takes.
func TestManualCommandsExist(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "packaging", "README.md"))
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence, shell := false, false
		for i, line := range strings.Split(string(b), "\n") {
			if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
				inFence = !inFence
				shell = inFence && (fence == "sh" || fence == "bash")
				continue
			}
			if !shell { // output blocks quote etcdkeeper's lines, not commands
				continue
			}
			if cmdLine, ok := commandLine(line); ok {
				checked++
				if err := parses(cmdLine); err != nil {
					t.Errorf("%s:%d: %q: %v", filepath.Base(page), i+1, strings.TrimSpace(line), err)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d command lines found in the manual's code blocks", checked)
	}
}

// commandLine returns the arguments of an etcdkeeper command line (a
// shell line of a code block or an example), up to a comment, a pipe or
// a redirection.
func commandLine(line string) ([]string, bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil, false
	}
	if fields[0] != "etcdkeeper" && fields[0] != "bin/etcdkeeper" && fields[0] != "/usr/bin/etcdkeeper" {
		return nil, false
	}
	var args []string
	for _, f := range fields[1:] {
		if f == "#" || strings.HasPrefix(f, "#") || f == "|" || f == "&&" || f == "||" || f == ";" || strings.HasPrefix(f, ">") || strings.HasPrefix(f, "2>") {
			break
		}
		args = append(args, f)
	}
	return args, true
}

// parses finds the command args name and parses its flags, on a fresh
// command tree.
func parses(args []string) error {
	root := rootCmd()
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if c == root {
		return fmt.Errorf("no command %q", strings.Join(args, " "))
	}
	if c.DisableFlagParsing {
		return nil
	}
	return c.ParseFlags(rest)
}

// TestGenDocs: gen-docs (make package) writes a man page per command, with
// its examples, and the three shell completions.
func TestGenDocs(t *testing.T) {
	dir := t.TempDir()
	root := rootCmd()
	root.SetArgs([]string{"gen-docs", "--man", filepath.Join(dir, "man"), "--completion", filepath.Join(dir, "completion")})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"man/etcdkeeper.1":                "etcdkeeper-status(1)",
		"man/etcdkeeper-status.1":         "etcdkeeper status --config /etc/etcdkeeper/cluster.yaml -o json",
		"man/etcdkeeper-import-kubeadm.1": "--from-cluster",
		"completion/etcdkeeper.bash":      "__start_etcdkeeper",
		"completion/_etcdkeeper":          "#compdef etcdkeeper",
		"completion/etcdkeeper.fish":      "complete -c etcdkeeper",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("gen-docs wrote no %s: %v", file, err)
			continue
		}
		if !strings.Contains(strings.ReplaceAll(string(b), `\-`, "-"), want) {
			t.Errorf("%s has no %q", file, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "man", "etcdkeeper-gen-docs.1")); err == nil {
		t.Error("the hidden gen-docs got a man page")
	}
}
