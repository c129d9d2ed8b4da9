package model

import "time"

// Memory is what the agent remembers between passes of its own past
// steps, as the decision takes it (reconcile.Input.Memory): not an
// observation of anything, so it is kept apart from Local. Forgotten (the
// agent restarts), each rule errs on the side of doing a step again.
type Memory struct {
	// Compacted is the revision this agent last compacted the cluster to
	// (or found compacted) in the NOSPACE procedure; 0 since it started.
	// Forgotten, the procedure compacts again, which etcd answers at once
	// (ErrCompacted).
	Compacted int64
	// Defragmented is what this agent measured when it last defragmented
	// each member (by ID): forgotten, a member is defragmented again.
	Defragmented map[uint64]DefragMark
	// NoSpaceFor is how long this agent has seen NOSPACE raised, without
	// a pass that saw it cleared; 0 while it is not.
	NoSpaceFor time.Duration
	// Restarted: this agent restarted its member for a rollout and holds
	// the cluster lock since (it passes the lock on once caught up).
	Restarted bool
	// RolloutSnapshot is the rollout (reconcile.RolloutKey) for which this
	// agent took the verified snapshot a rollout begins with ("": none).
	RolloutSnapshot string
	// LockReturned is how long ago this agent gave the lock back as a
	// learner that did not catch up in time (0: it did not).
	LockReturned time.Duration
	// RequestDone are the members this agent defragmented for the
	// operator's request in force (the others' are in their records).
	RequestDone []uint64
}
