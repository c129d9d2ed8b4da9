package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/atomicfile"
	"github.com/etcdkeeper/etcdkeeper/internal/kubeadm"
	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func importCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "import",
		Short: "Write a spec for an etcd cluster that runs without etcdkeeper (kubeadm)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(importKubeadmCmd())
	return c
}

func importKubeadmCmd() *cobra.Command {
	var manifests []string
	var pkiDir, output string
	var force bool
	c := &cobra.Command{
		Use:   "kubeadm [--manifest FILE]... [--pki-dir DIR] [-o FILE]",
		Short: "Write a spec from kubeadm's etcd static pod manifests",
		Long: `kubeadm reads the etcd static pod manifest of kubeadm's stacked control plane
(/etc/kubernetes/manifests/etcd.yaml) and writes an etcdkeeper spec for the same
members, data, certificates and flags: to stdout, or to -o FILE.

Give the manifest of every control-plane host (copy them to one machine, then
--manifest cp1.yaml --manifest cp2.yaml ...). kubeadm's --initial-cluster names
only the members known when that host joined, and the agents REMOVE members the
spec does not list: check the spec's members against 'etcdctl member list'.
A file may hold several manifests (YAML documents), or kubectl's list of the
etcd pods, every host at once:
  kubectl -n kube-system get pod -l component=etcd -o yaml > etcd-pods.yaml
Every pod in a file is read; anything that is not an etcd pod fails the import.

What could not be taken as it is, and what to check before use, is written as
comments in the spec and printed on stderr. The spec is then loaded the way the
agent loads it. Problems with files this machine cannot read (the certificates,
when the import runs on another machine or without root) are printed but do not
fail the import: the agent checks them again on each host.
Exit status: 0 when the spec is valid but for such files, 1 otherwise.

README.md, "kubeadm control-plane hosts", describes the move, one host at a time.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return importKubeadm(c.OutOrStdout(), c.ErrOrStderr(), manifests, pkiDir, output, force)
		},
	}
	c.Flags().StringArrayVar(&manifests, "manifest", []string{"/etc/kubernetes/manifests/etcd.yaml"}, "a host's etcd static pod manifest; repeat it for each control-plane host")
	c.Flags().StringVar(&pkiDir, "pki-dir", "/etc/kubernetes/pki/etcd", "kubeadm's etcd PKI dir: the agent uses its ca.crt and healthcheck-client.{crt,key}")
	c.Flags().StringVarP(&output, "output", "o", "", "write the spec to this file instead of stdout")
	c.Flags().BoolVar(&force, "force", false, "replace the -o file if it exists")
	return c
}

func importKubeadm(stdout, stderr io.Writer, files []string, pkiDir, output string, force bool) error {
	var ms []kubeadm.Manifest
	for _, f := range files {
		data, err := safefile.Read(f, kubeadm.MaxManifestBytes)
		if err != nil {
			return fmt.Errorf("read manifest: %w", err)
		}
		got, err := kubeadm.ParseManifests(data, f)
		if err != nil {
			return err
		}
		ms = append(ms, got...)
	}
	doc, err := kubeadm.ToSpec(ms, kubeadm.KubeadmPKI(pkiDir))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := kubeadm.Render(&buf, doc); err != nil {
		return err
	}
	where := "(stdout)"
	if output == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	} else {
		if err := writeNewFile(output, buf.Bytes(), force); err != nil {
			return err
		}
		where = output
	}
	names := make([]string, len(doc.Members))
	for i, m := range doc.Members {
		names[i] = m.Name
	}
	fmt.Fprintf(stderr, "%s: cluster %s, members %s, from %d manifest(s)\n", where, doc.ClusterName, strings.Join(names, ", "), len(ms))
	for _, w := range doc.Warnings {
		fmt.Fprintln(stderr, "check:", w)
	}
	return checkImported(stderr, buf.Bytes(), where, doc)
}

// checkImported loads the spec like the agent does. Files this machine
// cannot read are expected (another machine, no root): reported, not failed.
func checkImported(stderr io.Writer, data []byte, where string, doc kubeadm.Document) error {
	_, err := spec.Parse(data, where)
	if err == nil {
		fmt.Fprintf(stderr, "%s: a valid spec\n", where)
		return nil
	}
	var errs *spec.Errors
	if !errors.As(err, &errs) {
		return err
	}
	files, others := kubeadm.SplitProblems(*errs, unreadable(doc.Files()))
	if len(files) > 0 {
		fmt.Fprintf(stderr, "files this machine cannot read (the agent checks them again on each host):\n%v\n", &files)
	}
	if len(others) == 0 {
		fmt.Fprintf(stderr, "%s: a valid spec but for those files\n", where)
		return nil
	}
	fmt.Fprintln(stderr, &others)
	err = fmt.Errorf("%s is not a valid spec: fix the problems above before any agent uses it", where)
	fmt.Fprintln(stderr, "etcdkeeper:", err)
	return &exitError{code: 1, err: err}
}

func unreadable(files []string) []string {
	var out []string
	for _, f := range files {
		if fh, err := os.Open(f); err != nil {
			out = append(out, f)
		} else {
			fh.Close()
		}
	}
	return out
}

// writeNewFile writes data to path through a rename, so that an agent
// watching path never reads half a spec; an existing file is replaced only
// with force, since agents act on a changed spec at once.
func writeNewFile(path string, data []byte, force bool) error {
	if _, err := os.Stat(path); err == nil && !force {
		return fmt.Errorf("%s exists: write to another file, or give --force to replace it (agents that read it act on the new spec at once)", path)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	return nil
}
