package main

import (
	"os"

	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// dialSpec connects status and plan to the cluster the way this host's
// agent does: with the tls.agent certificate of the member named like the
// host (the agent's default --name), or of the first member on a host the
// spec does not list. Only a tls.agent path with {name} makes the choice
// matter.
func dialSpec(s *spec.Spec) (*cluster.Client, error) {
	var eps []string
	for _, m := range s.Members {
		eps = append(eps, m.ClientURLs...)
	}
	host, _ := os.Hostname()
	m, ok := s.Lookup(host)
	if !ok {
		m = s.Members[0]
	}
	return cluster.DialSpec(s, m, eps)
}
