package main

import (
	"os"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// hostname is the kernel's host name (tests set it).
var hostname = func() string {
	h, _ := os.Hostname()
	return h
}

// dialSpec connects status and plan to the cluster the way this host's
// agent does: with the tls.agent certificate of the member this host
// runs (spec.ForHost: the agent's default --name), or of the first member
// on a host the spec does not list. Only a tls.agent path with {name}
// makes the choice matter.
func dialSpec(s *spec.Spec) (*cluster.Client, error) {
	m, ok := s.ForHost(hostname())
	if !ok {
		m = s.Members[0]
	}
	return dialAs(s, m)
}

// dialAs connects to every member with m's tls.agent certificate.
func dialAs(s *spec.Spec, m spec.Member) (*cluster.Client, error) {
	var eps []string
	for _, m := range s.Members {
		eps = append(eps, m.ClientURLs...)
	}
	return cluster.DialSpec(s, m, eps)
}
