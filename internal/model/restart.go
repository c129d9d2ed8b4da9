package model

import "strings"

// Restart is why the running local member must restart, as the pass
// observed it: the spec changed its settings, its etcd binary (another
// version, path or checksum), or the agent's own binary changed on disk.
// Every reason goes through the one rolling-restart rule
// (reconcile.rollingRestart): one member at a time, the leader last.
type Restart struct {
	// Why says it for people and is the rollout's key across the agents
	// ("etcd 3.6.16 → 3.7.3"); "" when no restart is due.
	Why string
	// Agent: the agent's own binary changed: the agent restarts itself
	// (and its etcd with it), not only etcd.
	Agent bool
	// EtcdFrom and EtcdTo are the etcd versions the restart goes from and
	// to ("3.6.16", "3.7.3"), when it changes etcd's binary: the
	// preflight judges the move against the cluster version.
	EtcdFrom, EtcdTo string
	// AgentOnly: only the agent restarts. Its new binary embeds the same
	// etcd, nothing else is due, and the running etcd can outlive the
	// agent's exec (etcdproc.Process.Adoptable): the new process adopts
	// it, and the member never stops serving.
	AgentOnly bool
}

// RolloutNote is what a rollout's decision says of this member, typed,
// for the rollout line other agents and the commands print (nil: nothing
// to say).
type RolloutNote struct {
	// Held: the budget holds this member's restart on another member;
	// HeldOn says on which, and why (for people).
	Held   bool   `json:"held,omitempty"`
	HeldOn string `json:"heldOn,omitempty"`
	// CatchingUp: restarted onto a new agent binary, not caught up yet.
	CatchingUp bool `json:"catchingUp,omitempty"`
}

// Due: a restart is due.
func (r Restart) Due() bool { return r.Why != "" }

// Also adds another reason to r.
func (r Restart) Also(why string) Restart {
	if why == "" {
		return r
	}
	if r.Why == "" {
		r.Why = why
		return r
	}
	if !strings.Contains(r.Why, why) {
		r.Why += "; " + why
	}
	return r
}
