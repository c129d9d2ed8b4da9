package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/kubeadm"
	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

func importCmd() *cobra.Command {
	c := &cobra.Command{
		Use:     "import",
		Example: `  etcdkeeper import kubeadm --manifest /etc/kubernetes/manifests/etcd.yaml -o cluster.yaml`,
		Short:   "Write a spec for an etcd cluster that runs without etcdkeeper (kubeadm)",
		Args:    cobra.NoArgs,
	}
	c.AddCommand(importKubeadmCmd())
	return c
}

// importOptions are import kubeadm's flags.
type importOptions struct {
	manifests      []string
	pkiDir, output string
	// fromCluster are client URLs of a running member: the spec's members
	// are the cluster's member list, read there with cert, key and cacert.
	fromCluster       []string
	cert, key, cacert string
}

func importKubeadmCmd() *cobra.Command {
	var o importOptions
	c := &cobra.Command{
		Use:   "kubeadm [--manifest FILE]... [--from-cluster URL [--cert FILE --key FILE] [--cacert FILE]] [--pki-dir DIR] [-o FILE]",
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

--from-cluster URL reads the member list from a running member instead
(linearizably, as 'etcdctl member list' does), and the spec lists exactly
the cluster's members: the manifests at hand are authoritative for their
members, and each member with no manifest gets the name, peer URLs and
client URLs the cluster reports (the import says which ones). After
'kubeadm upgrade' each manifest's --initial-cluster names only its own host,
so on a control-plane host, as root:
  etcdkeeper import kubeadm --from-cluster https://127.0.0.1:2379 -o cluster.yaml
reads this host's manifest and the cluster's members. A manifest whose
member the cluster does not list fails the import, as do a learner (a join
in progress) and a member that has not started with no manifest at hand.
The client certificate is kubeadm's healthcheck-client (or, without it, the
API server's apiserver-etcd-client in the PKI dir's parent), the CA its
ca.crt; --cert, --key and --cacert name others (e.g. copies on the machine
that runs the import).

What could not be taken as it is, and what to check before use, is written as
comments in the spec and printed on stderr. The spec is then loaded the way the
agent loads it. Problems with files this machine cannot read (the certificates,
when the import runs on another machine or without root) are printed but do not
fail the import: the agent checks them again on each host.
Exit status: 0 when the spec is valid but for such files, 1 otherwise. Only a
valid spec is written: to stdout, or to -o FILE, which must not exist (agents
act on a changed spec at once: compare the new file with the one in use and
move it into place yourself).

After writing the spec, the import prints each host's systemd drop-in and
the next steps: check the spec, move the hosts one at a time (leadership
off, the static pod's manifest out, etcdkeeper on the same data dir), then
switch kubeadm's ClusterConfiguration to etcd.external.
docs/kubeadm.md describes the move, one host at a time.`,
		Example: `  # every host's manifest, copied to one machine
  etcdkeeper import kubeadm --manifest cp1.yaml --manifest cp2.yaml --manifest cp3.yaml -o cluster.yaml

  # all the etcd pods at once, through kubectl
  kubectl -n kube-system get pod -l component=etcd -o yaml > etcd-pods.yaml
  etcdkeeper import kubeadm --manifest etcd-pods.yaml -o cluster.yaml

  # on a control-plane host, as root: this host's manifest and the cluster's member list
  etcdkeeper import kubeadm --from-cluster https://127.0.0.1:2379 -o cluster.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return importKubeadm(c.OutOrStdout(), c.ErrOrStderr(), o)
		},
	}
	c.Flags().StringArrayVar(&o.manifests, "manifest", []string{"/etc/kubernetes/manifests/etcd.yaml"}, "a host's etcd static pod manifest; repeat it for each control-plane host")
	c.Flags().StringVar(&o.pkiDir, "pki-dir", "", "kubeadm's etcd PKI dir: the agent uses its ca.crt and healthcheck-client.{crt,key} (default: the directory of the manifest's --cert-file, usually /etc/kubernetes/pki/etcd)")
	c.Flags().StringVarP(&o.output, "output", "o", "", "write the spec to this new file instead of stdout (only a valid spec; never over an existing file)")
	c.Flags().StringSliceVar(&o.fromCluster, "from-cluster", nil, "a running member's client URL (https://10.0.0.11:2379; several, comma-separated, are tried in turn): the spec's members are the member list read there")
	c.Flags().StringVar(&o.cert, "cert", "", "--from-cluster: the client certificate (default: healthcheck-client.crt in the PKI dir, else apiserver-etcd-client.crt in its parent)")
	c.Flags().StringVar(&o.key, "key", "", "--from-cluster: the key of --cert (default: the key next to the default certificate)")
	c.Flags().StringVar(&o.cacert, "cacert", "", "--from-cluster: the CA that signed the member's server certificate (default: ca.crt in the PKI dir)")
	return c
}

func importKubeadm(stdout, stderr io.Writer, o importOptions) error {
	if len(o.fromCluster) == 0 && (o.cert != "" || o.key != "" || o.cacert != "") {
		return errors.New("--cert, --key and --cacert are --from-cluster's: give --from-cluster too")
	}
	var ms []kubeadm.Manifest
	var err error
	files, pkiDir, output := o.manifests, o.pkiDir, o.output
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
	if pkiDir == "" {
		pkiDir = kubeadm.PKIDirOf(ms)
	} else if pkiDir, err = filepath.Abs(pkiDir); err != nil {
		return fmt.Errorf("--pki-dir: %w", err)
	}
	var doc kubeadm.Document
	if len(o.fromCluster) == 0 {
		doc, err = kubeadm.ToSpec(ms, kubeadm.KubeadmPKI(pkiDir))
	} else {
		var live kubeadm.Cluster
		if live, err = readCluster(o, pkiDir); err != nil {
			return err
		}
		doc, err = kubeadm.ToSpecLive(ms, live, kubeadm.KubeadmPKI(pkiDir))
	}
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := kubeadm.Render(&buf, doc); err != nil {
		return err
	}
	where := cmp.Or(output, "(stdout)")
	if output != "" {
		if _, err := os.Lstat(output); err == nil {
			return fmt.Errorf("%s exists: write to a new file, compare it with the spec in use, and move it into place yourself (agents that read it act on the new spec at once)", output)
		}
	}
	names := make([]string, len(doc.Members))
	for i, m := range doc.Members {
		names[i] = m.Name
	}
	from := ""
	if len(o.fromCluster) > 0 {
		from = " and the cluster's member list"
		if len(doc.FromCluster) > 0 {
			from = fmt.Sprintf(" and the cluster's member list (%s from the cluster's member list, not from a manifest)", strings.Join(doc.FromCluster, ", "))
		}
	}
	fmt.Fprintf(stderr, "%s: cluster %s, members %s, from %d manifest(s)%s\n", where, doc.ClusterName, strings.Join(names, ", "), len(ms), from)
	for _, w := range doc.Warnings {
		fmt.Fprintln(stderr, "check:", w)
	}
	if err := checkImported(stderr, buf.Bytes(), where, doc); err != nil {
		return err
	}
	if output == "" {
		_, err = stdout.Write(buf.Bytes())
	} else {
		err = writeNewFile(output, buf.Bytes())
	}
	if err == nil {
		printDropIns(stderr, doc)
		printNextSteps(stderr, doc, pkiDir)
	}
	return err
}

// printDropIns prints each host's systemd drop-in: --name is the member's
// name, kubeadm's node name, which on clouds is often not the host name
// (the default of --name).
// ReadWritePaths lets the agent renew the certificates in kubeadm's PKI
// dirs (the unit's ProtectSystem=strict makes /etc read-only).
func printDropIns(w io.Writer, doc kubeadm.Document) {
	fmt.Fprintln(w, "drop-in for each host (systemctl edit etcdkeeper; docs/kubeadm.md):")
	rw := ""
	if doc.TLS.CA.KeyFile != "" {
		rw = "    ReadWritePaths=" + path.Dir(path.Dir(doc.TLS.CA.KeyFile)) + "\n"
	}
	for _, m := range doc.Members {
		fmt.Fprintf(w, "  on %s:\n    [Service]\n    User=root\n    Group=root\n%s    ExecStart=\n    ExecStart=/usr/bin/etcdkeeper run --config /etc/etcdkeeper/cluster.yaml --name %s\n", m.Name, rw, m.Name)
	}
}

// printNextSteps prints the rest of the move (docs/kubeadm.md): what the
// operator does with the spec, host by host, and kubeadm's switch to
// etcd.external with this cluster's endpoints and certificates.
func printNextSteps(w io.Writer, doc kubeadm.Document, pkiDir string) {
	var endpoints []string
	for _, m := range doc.Members {
		endpoints = append(endpoints, m.ClientURLs...)
	}
	pki := filepath.Dir(pkiDir)
	fmt.Fprintf(w, `next steps (docs/kubeadm.md):
  1. Compare the spec's members with 'etcdctl member list': the agents REMOVE members the spec does not list.
  2. On every control-plane host: install the package, put the spec at /etc/etcdkeeper/cluster.yaml,
     add the drop-in above (do not start the service yet), then
       etcdkeeper validate --config /etc/etcdkeeper/cluster.yaml
       etcdkeeper status --config /etc/etcdkeeper/cluster.yaml    # must exit 0
  3. One host at a time, each only once 'etcdkeeper status' exits 0:
       etcdctl move-leader <another member's ID>                   # if this host's member leads
       mv /etc/kubernetes/manifests/etcd.yaml /etc/kubernetes/etcd.yaml.kubeadm
       crictl ps --name '^etcd$'                                   # wait until it shows nothing
       systemctl enable --now etcdkeeper                           # same data dir, same member ID: nothing moves
  4. Once every host runs etcdkeeper, replace etcd.local in kubeadm's ClusterConfiguration
     (kubectl -n kube-system edit configmap kubeadm-config) with
       etcd:
         external:
           endpoints: [%s]
           caFile: %s
           certFile: %s
           keyFile: %s
     so that 'kubeadm upgrade' and 'kubeadm join --control-plane' leave etcd to etcdkeeper.
  5. A new control-plane host then gets its etcd member from the spec, not from kubeadm: issue its etcd
     certificates, add its member to the spec on every host, start etcdkeeper there, then
     'kubeadm join --control-plane'.
`, strings.Join(endpoints, ", "), filepath.Join(pkiDir, "ca.crt"),
		filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
}

// checkImported loads the spec like the agent does. Files this machine
// cannot read are expected (another machine, no root): reported, not failed.
func checkImported(stderr io.Writer, data []byte, where string, doc kubeadm.Document) error {
	s, err := spec.Parse(data, where)
	if err == nil && len(s.Warnings.Expired()) > 0 {
		expired := s.Warnings.Expired()
		err = &expired
	}
	if err == nil {
		printWarnings(stderr, s.Warnings)
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
	// Nothing is written, so each problem comes with its line of the spec.
	lines := strings.Split(string(data), "\n")
	for _, e := range others {
		fmt.Fprintln(stderr, e.Error())
		if e.Line >= 1 && e.Line <= len(lines) {
			fmt.Fprintf(stderr, "    %d | %s\n", e.Line, lines[e.Line-1])
		}
	}
	err = fmt.Errorf("the imported spec is not valid, so nothing was written to %s (the lines above are the spec's it would have been): fix the manifests and import again", where)
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

// writeNewFile creates path with data; it never replaces a file (another
// import's, or a spec agents run on). A failed write leaves no file.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write spec %s: %w", path, err)
	}
	return nil
}
