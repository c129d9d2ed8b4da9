package model

import (
	"strings"
	"testing"
)

func TestEtcdVersionRefused(t *testing.T) {
	on := func(versions ...string) []Member {
		var ms []Member
		for i, v := range versions {
			ms = append(ms, Member{ID: uint64(i + 1), Name: "node" + string(rune('1'+i)), Version: v})
		}
		return ms
	}
	tests := []struct {
		name    string
		to      string
		members []Member
		want    string // a part of the refusal; "" for none
	}{
		{"same version", "3.7.3", on("3.7.3", "3.7.3", "3.7.3"), ""},
		{"a patch up", "3.7.4", on("3.7.3", "3.7.3", "3.7.3"), ""},
		{"a patch down stays in the minor", "3.7.1", on("3.7.3", "3.7.3", "3.7.3"), ""},
		{"one minor up", "3.7.3", on("3.6.16", "3.6.16", "3.6.16"), ""},
		{"one minor up, mid-rollout", "3.7.3", on("3.7.3", "3.6.16", "3.6.16"), ""},
		{"two minors up", "3.8.0", on("3.6.16", "3.6.16", "3.6.16"), "more than one minor version ahead of the cluster version 3.6"},
		{"two minors up from a mixed cluster", "3.8.0", on("3.7.3", "3.7.3", "3.6.16"), "cluster version 3.6"},
		{"a major up", "4.0.0", on("3.7.3", "3.7.3", "3.7.3"), "more than one minor"},
		{"a minor down", "3.6.16", on("3.7.3", "3.7.3", "3.7.3"), "older than the cluster version 3.7: a downgrade"},
		{"3.5.26 to 3.6", "3.6.0", on("3.5.26", "3.5.26", "3.5.27"), ""},
		{"3.5 below 3.5.26 to 3.6", "3.6.0", on("3.5.26", "3.5.20", "3.5.26"), "node2 runs 3.5.20"},
		{"within 3.5 below 3.5.26", "3.5.26", on("3.5.20", "3.5.20", "3.5.20"), ""},
		{"no member reported a version", "3.9.0", on("", "", ""), ""},
		{"an unanswered member is not judged", "3.7.3", on("", "3.7.3", "3.7.3"), ""},
		{"v prefix and suffix", "v3.7.3-rc.0", on("3.7.3"), ""},
		{"unreadable new version", "three", on("3.7.3"), "cannot tell the new etcd's version"},
	}
	for _, tt := range tests {
		got := EtcdVersionRefused(tt.to, tt.members)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: EtcdVersionRefused(%s) = %q, want %q", tt.name, tt.to, got, tt.want)
		}
	}
}

func TestParseEtcdVersion(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"3.7.3", "3.7.3", true},
		{"v3.6.16", "3.6.16", true},
		{"3.7", "3.7.0", true},
		{"3.8.0-alpha.0", "3.8.0", true},
		{"3", "", false},
		{"3.x.1", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		v, err := ParseEtcdVersion(tt.in)
		if (err == nil) != tt.ok || (tt.ok && v.String() != tt.want) {
			t.Errorf("ParseEtcdVersion(%q) = %v, %v; want %s ok=%v", tt.in, v, err, tt.want, tt.ok)
		}
	}
}

func TestStartEtcdVersion(t *testing.T) {
	run := Build{Version: "0.4.0", EtcdVersion: "3.7.3"}
	inst := &Build{Version: "0.5.0", EtcdVersion: "3.8.0"}
	tests := []struct {
		name string
		b    Binary
		want string
	}{
		{"the embedded etcd", Binary{Running: run}, "3.7.3"},
		{"the new file's etcd: the child is <path> etcd", Binary{Running: run, Installed: inst}, "3.8.0"},
		{"etcd.binary: not ours to judge", Binary{Running: run, Installed: inst, External: true}, ""},
	}
	for _, tt := range tests {
		if got := tt.b.StartEtcdVersion(); got != tt.want {
			t.Errorf("%s: StartEtcdVersion = %q, want %q", tt.name, got, tt.want)
		}
	}
}
