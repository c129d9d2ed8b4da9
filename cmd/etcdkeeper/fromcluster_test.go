package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
	"github.com/etcdkeeper/etcdkeeper/internal/testetcd"
	"github.com/etcdkeeper/etcdkeeper/internal/testpki"
)

// kubeadmManifest is the etcd static pod kubeadm writes for member name,
// with its certificates in pkiDir (mounted at the same path).
func kubeadmManifest(name, peerURL, clientURL, initialCluster, pkiDir string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  labels: {component: etcd, tier: control-plane}
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=%[3]s
    - --cert-file=%[5]s/server.crt
    - --client-cert-auth=true
    - --data-dir=/var/lib/etcd
    - --initial-advertise-peer-urls=%[2]s
    - --initial-cluster=%[4]s
    - --key-file=%[5]s/server.key
    - --listen-client-urls=%[3]s
    - --listen-peer-urls=%[2]s
    - --name=%[1]s
    - --snapshot-count=10000
    - --trusted-ca-file=%[5]s/ca.crt
    image: registry.k8s.io/etcd:3.6.4-0
    name: etcd
    volumeMounts:
    - {mountPath: /var/lib/etcd, name: etcd-data}
    - {mountPath: %[5]s, name: etcd-certs}
  hostNetwork: true
  volumes:
  - {hostPath: {path: %[5]s, type: DirectoryOrCreate}, name: etcd-certs}
  - {hostPath: {path: /var/lib/etcd, type: DirectoryOrCreate}, name: etcd-data}
`, name, peerURL, clientURL, initialCluster, pkiDir)
}

// TestImportFromCluster: --from-cluster reads the member list from a real
// etcd that serves its clients TLS only, with kubeadm's client certificate
// found next to the manifest's --cert-file. cp1 and cp2 run; cp3 was
// added but has not started. With the manifests of cp1 and cp3 only, the
// spec has all three: cp2 as the cluster lists it, cp3 matched to its
// manifest by peer URL. A manifest the cluster does not list, and a CA
// that did not sign the member's certificate, fail the import and write
// nothing.
//
// Members on one machine share no data dir (spec.SameHost), and any two
// loopback addresses are one machine, so the members need addresses
// other than loopback: the test runs in a network namespace of its own
// (inOwnNetns), where cp1 is 198.18.0.1 and cp2 198.18.0.2 (the
// benchmarking range, RFC 2544), both on its loopback device. cp3 and cp4
// get 198.18.0.3 and 198.18.0.4, which no device there has: nothing
// answers them and nothing is routed out.
func TestImportFromCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cp1IP, cp2IP := net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2)
	cp3IP, cp4IP := net.IPv4(198, 18, 0, 3), net.IPv4(198, 18, 0, 4)
	if !inOwnNetns(t, cp1IP.String()+"/32", cp2IP.String()+"/32") {
		return
	}
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki", "etcd")
	ca := testpki.NewCA(t, "etcd-ca")
	testpki.WriteFile(t, filepath.Join(pki, "ca.crt"), ca.CertPEM)
	serverCrt, serverKey := ca.Issue(t, "etcd-server", cp1IP, cp2IP, cp3IP, cp4IP).Write(t, pki, "server")
	ca.Issue(t, "kube-etcd-healthcheck-client").Write(t, pki, "healthcheck-client")

	nodes := testetcd.StartCluster(t, []testetcd.Node{{Name: "cp1", Host: cp1IP.String()}, {Name: "cp2", Host: cp2IP.String()}},
		&testetcd.ClientTLS{CertFile: serverCrt, KeyFile: serverKey, TrustedCAFile: filepath.Join(pki, "ca.crt")})
	cp1, cp2 := nodes[0], nodes[1]
	cp3Peer := url.URL{Scheme: "http", Host: net.JoinHostPort(cp3IP.String(), "2380")}
	cp3Client := url.URL{Scheme: "https", Host: net.JoinHostPort(cp3IP.String(), "2379")}
	cp4Peer := url.URL{Scheme: "http", Host: net.JoinHostPort(cp4IP.String(), "2380")}
	cp4Client := url.URL{Scheme: "https", Host: net.JoinHostPort(cp4IP.String(), "2379")}

	// kubeadm join of cp3: added, never started.
	tlsCfg, err := cluster.TLSConfig(spec.TLSClient{CertFile: filepath.Join(pki, "healthcheck-client.crt"), KeyFile: filepath.Join(pki, "healthcheck-client.key"), TrustedCAFile: filepath.Join(pki, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cp1.ClientURL}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// etcd refuses to add a voter until every member has been connected
	// for a while (its strict reconfiguration check): unhealthy cluster.
	for deadline := time.Now().Add(20 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.MemberAdd(ctx, []string{cp3Peer.String()})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member add cp3: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	manifest := func(name, text string) string {
		p := filepath.Join(dir, name+".yaml")
		testpki.WriteFile(t, p, []byte(text))
		return p
	}
	// cp1's manifest after kubeadm upgrade: its --initial-cluster names
	// only itself.
	cp1Manifest := manifest("cp1", kubeadmManifest("cp1", cp1.PeerURL, cp1.ClientURL, "cp1="+cp1.PeerURL, pki))
	cp3Manifest := manifest("cp3", kubeadmManifest("cp3", cp3Peer.String(), cp3Client.String(),
		"cp1="+cp1.PeerURL+",cp2="+cp2.PeerURL+",cp3="+cp3Peer.String(), pki))

	run := func(o importOptions) (string, string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- importKubeadm(&stdout, &stderr, o) }()
		select {
		case err := <-done:
			return stdout.String(), stderr.String(), err
		case <-time.After(30 * time.Second):
			t.Fatal("import did not return")
			return "", "", nil
		}
	}

	t.Run("members from the cluster", func(t *testing.T) {
		out := filepath.Join(dir, "cluster.yaml")
		_, stderr, err := run(importOptions{manifests: []string{cp1Manifest, cp3Manifest}, fromCluster: []string{cp1.ClientURL}, output: out})
		if err != nil {
			t.Fatalf("import: %v\n%s", err, stderr)
		}
		if want := "members cp1, cp2, cp3, from 2 manifest(s) and the cluster's member list (cp2 from the cluster's member list, not from a manifest)"; !strings.Contains(stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		s, err := spec.Parse(data, out)
		if err != nil {
			t.Fatalf("the written spec: %v\n%s", err, data)
		}
		want := map[string][2]string{
			"cp1": {cp1.PeerURL, cp1.ClientURL},
			"cp2": {cp2.PeerURL, cp2.ClientURL}, // only the cluster knows them
			"cp3": {cp3Peer.String(), cp3Client.String()},
		}
		if len(s.Members) != len(want) {
			t.Fatalf("%d members, want %d:\n%s", len(s.Members), len(want), data)
		}
		for _, m := range s.Members {
			w, ok := want[m.Name]
			if !ok || strings.Join(m.PeerURLs, ",") != w[0] || strings.Join(m.ClientURLs, ",") != w[1] {
				t.Errorf("member %s: peer %v client %v, want %v", m.Name, m.PeerURLs, m.ClientURLs, w)
			}
		}
		if !bytes.Contains(data, []byte("# From the cluster's member list")) || !bytes.Contains(data, []byte("not started yet")) {
			t.Errorf("the spec does not say which member came from the cluster and which has not started:\n%s", data)
		}
	})

	t.Run("a manifest the cluster does not list", func(t *testing.T) {
		cp4 := manifest("cp4", kubeadmManifest("cp4", cp4Peer.String(), cp4Client.String(), "cp4="+cp4Peer.String(), pki))
		out := filepath.Join(dir, "cp4-cluster.yaml")
		_, stderr, err := run(importOptions{manifests: []string{cp1Manifest, cp3Manifest, cp4}, fromCluster: []string{cp2.ClientURL}, output: out})
		if want := cp4 + ": member cp4 (peer URLs " + cp4Peer.String() + ") is not in the cluster's member list"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q\n%s", err, want, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	})

	t.Run("a CA that did not sign the member's certificate", func(t *testing.T) {
		other := testpki.NewCA(t, "other-ca")
		otherCA := filepath.Join(dir, "other-ca.crt")
		testpki.WriteFile(t, otherCA, other.CertPEM)
		out := filepath.Join(dir, "other-cluster.yaml")
		_, _, err := run(importOptions{manifests: []string{cp1Manifest}, fromCluster: []string{cp1.ClientURL}, cacert: otherCA, output: out})
		if err == nil || !strings.Contains(err.Error(), "--from-cluster "+cp1.ClientURL) {
			t.Errorf("err = %v, want a failure to list members", err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	})
}
