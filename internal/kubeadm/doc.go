// Package kubeadm turns the etcd static pods of a kubeadm control plane
// (/etc/kubernetes/manifests/etcd.yaml on each control-plane host) into an
// etcdkeeper spec, so that the same members, with the same data, certificates
// and flags, can continue under etcdkeeper.
//
// Everything here is pure: ParseManifest reads one manifest's bytes, ToSpec
// merges the manifests of several hosts into a Document, and Render writes
// the Document as a commented spec file. The command that reads files and
// checks the result with spec.Parse is cmd/etcdkeeper/import.go.
package kubeadm
