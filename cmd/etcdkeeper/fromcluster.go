package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/kubeadm"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// readCluster reads the member list for import kubeadm --from-cluster:
// linearizably (through the leader, as etcdctl member list), within
// cluster.CallTimeout, with TLS and a client certificate.
func readCluster(o importOptions, pkiDir string) (kubeadm.Cluster, error) {
	endpoint := strings.Join(o.fromCluster, ",")
	for _, e := range o.fromCluster {
		u, err := url.Parse(e)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return kubeadm.Cluster{}, fmt.Errorf("--from-cluster %s: not an https URL of an etcd client port (https://10.0.0.11:2379): kubeadm's etcd serves its clients TLS only", e)
		}
	}
	creds, err := clientCredentials(o, pkiDir)
	if err != nil {
		return kubeadm.Cluster{}, err
	}
	tlsCfg, err := cluster.TLSConfig(creds)
	if err != nil {
		return kubeadm.Cluster{}, fmt.Errorf("--from-cluster: --cacert %s, --cert %s, --key %s: %w", creds.TrustedCAFile, creds.CertFile, creds.KeyFile, err)
	}
	c, err := cluster.Dial(o.fromCluster, tlsCfg)
	if err != nil {
		return kubeadm.Cluster{}, fmt.Errorf("--from-cluster %s: %w", endpoint, err)
	}
	defer c.Close()
	id, members, err := c.Members(context.Background())
	if err != nil {
		return kubeadm.Cluster{}, fmt.Errorf("--from-cluster %s: %w (is it a member's client URL, does it have a leader, and is its server certificate signed by %s, and %s by its client CA?)",
			endpoint, err, creds.TrustedCAFile, creds.CertFile)
	}
	live := kubeadm.Cluster{Endpoint: endpoint, ID: id}
	for _, m := range members {
		live.Members = append(live.Members, kubeadm.ClusterMember{
			ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner,
		})
	}
	return live, nil
}

// clientCredentials are --cert, --key and --cacert, or kubeadm's: the
// health check's client certificate in the PKI dir, else the API server's
// in its parent (/etc/kubernetes/pki/apiserver-etcd-client.crt), and the
// etcd CA.
func clientCredentials(o importOptions, pkiDir string) (spec.TLSClient, error) {
	c := spec.TLSClient{CertFile: o.cert, KeyFile: o.key, TrustedCAFile: o.cacert}
	if c.TrustedCAFile == "" {
		c.TrustedCAFile = filepath.Join(pkiDir, "ca.crt")
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		return c, nil
	case c.CertFile != "" || c.KeyFile != "":
		return spec.TLSClient{}, errors.New("--from-cluster: give --cert and --key together")
	}
	candidates := []string{
		filepath.Join(pkiDir, "healthcheck-client"),
		filepath.Join(filepath.Dir(pkiDir), "apiserver-etcd-client"),
	}
	for _, base := range candidates {
		if _, err := os.Stat(base + ".crt"); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		c.CertFile, c.KeyFile = base+".crt", base+".key"
		return c, nil
	}
	return spec.TLSClient{}, fmt.Errorf("--from-cluster: no client certificate: neither %s.crt nor %s.crt exists (run the import as root on a control-plane host, or give --cert and --key, and --cacert)",
		candidates[0], candidates[1])
}
