package agent

import (
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// TestBinaryRestartAgentOnly: the agent restarts alone (its etcd adopted
// by the new binary) only onto the same embedded etcd, with nothing else
// due, and an etcd that can outlive the exec.
func TestBinaryRestartAgentOnly(t *testing.T) {
	run := model.Build{Version: "0.4.0", EtcdVersion: "3.7.3"}
	same := &model.Build{Version: "0.5.0", EtcdVersion: "3.7.3"}
	newer := &model.Build{Version: "0.5.0", EtcdVersion: "3.7.4"}
	tests := []struct {
		name      string
		r         model.Restart
		b         model.Binary
		adoptable bool
		agentOnly bool
		due       bool
	}{
		{"nothing installed", model.Restart{}, model.Binary{Running: run}, true, false, false},
		{"same etcd, adoptable: the agent alone", model.Restart{}, model.Binary{Running: run, Installed: same}, true, true, true},
		{"same etcd, etcd not on a lifeline (started by an older agent)", model.Restart{}, model.Binary{Running: run, Installed: same}, false, false, true},
		{"another embedded etcd", model.Restart{}, model.Binary{Running: run, Installed: newer}, true, false, true},
		{"settings changed too", model.Restart{Why: "changed settings"}, model.Binary{Running: run, Installed: same}, true, false, true},
		{"the spec's own etcd binary", model.Restart{}, model.Binary{Running: run, Installed: same, External: true}, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := binaryRestart(tt.r, tt.b, tt.adoptable)
			if r.AgentOnly != tt.agentOnly || r.Due() != tt.due {
				t.Errorf("%+v: AgentOnly %v, due %v; want %v, %v", r, r.AgentOnly, r.Due(), tt.agentOnly, tt.due)
			}
			if tt.agentOnly && (!r.Agent || r.EtcdTo != "") {
				t.Errorf("%+v: an agent-only restart names an etcd move or not the agent", r)
			}
		})
	}
}
