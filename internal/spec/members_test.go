package spec

import "testing"

func TestForHost(t *testing.T) {
	s := &Spec{Members: []Member{{Name: "node1"}, {Name: "node2.example.com"}, {Name: "node2"}, {Name: "db.internal"}}}
	tests := []struct {
		host, want string
		ok         bool
	}{
		{"node1", "node1", true},
		{"node1.example.com", "node1", true}, // the first label
		{"node1.", "node1", true},
		{"node2.example.com", "node2.example.com", true}, // the exact name first
		{"node2.other.org", "node2", true},
		{"db.internal", "db.internal", true},
		{"db", "", false}, // a member's first label is not a host's name
		{"node3.example.com", "", false},
		{"node10", "", false},
		{"vm", "", false},
		{"", "", false},
		{".example.com", "", false},
	}
	for _, tt := range tests {
		m, ok := s.ForHost(tt.host)
		if ok != tt.ok || m.Name != tt.want {
			t.Errorf("ForHost(%q) = %q, %v; want %q, %v", tt.host, m.Name, ok, tt.want, tt.ok)
		}
	}
}
