package model

import "testing"

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
