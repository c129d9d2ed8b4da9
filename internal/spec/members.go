package spec

import (
	"strconv"
	"strings"
)

// Lookup returns the member called name.
func (s *Spec) Lookup(name string) (Member, bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Names returns the member names in spec order.
func (s *Spec) Names() []string {
	names := make([]string, len(s.Members))
	for i, m := range s.Members {
		names[i] = m.Name
	}
	return names
}

// ForHost is the member a host of that kernel host name runs: the member
// named exactly so, else the member named like its first label ("node1"
// for "node1.example.com": kubeadm and many installers name members by
// the short host name while the kernel's is the FQDN). It is the one rule
// by which the CLI and the agent's default --name map a host to its
// member.
func (s *Spec) ForHost(host string) (Member, bool) {
	if m, ok := s.Lookup(host); ok || host == "" {
		return m, ok
	}
	if short, _, found := strings.Cut(host, "."); found && short != "" {
		return s.Lookup(short)
	}
	return Member{}, false
}

// Quotas are the members' quota-backend-bytes as the spec sets them (a
// member's own flags over the cluster's), by name; members without one
// are left out (etcd's default).
func (s *Spec) Quotas() map[string]int64 {
	const name = "quota-backend-bytes"
	out := map[string]int64{}
	for _, m := range s.Members {
		v, ok := m.Flags[name]
		if !ok {
			v = s.Etcd.Flags[name]
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			out[m.Name] = n
		}
	}
	return out
}
