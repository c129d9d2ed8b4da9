package model

import "time"

// RequestKind is what an operator's command asks the agents to do.
type RequestKind string

// The requests the commands write (etcdkeeper defrag --yes, leader move).
const (
	RequestDefrag     RequestKind = "defrag"
	RequestLeaderMove RequestKind = "leader-move"
)

// Request is an operator's command, written into the cluster for the
// agents' loop to carry out like any of its own steps, under every rule
// (the pause, NOSPACE, the membership first, the disruption budget, the
// cluster lock): etcd-manager-ctl's commands and Patroni's manual
// failover are the model. It is bound to the command's lease: it goes
// when the command does.
type Request struct {
	ID   string      `json:"id"`
	Kind RequestKind `json:"kind"`
	// Member: a defragmentation of this member only, whatever its free
	// share ("": every member past the thresholds).
	Member string `json:"member,omitempty"`
	// To: the member a leader move hands leadership to.
	To string    `json:"to,omitempty"`
	By string    `json:"by,omitempty"`
	At time.Time `json:"at"`
}

// RequestPhase is where a request stands, as one agent's pass saw it.
type RequestPhase string

const (
	// RequestWaiting: a rule holds it (Text says which).
	RequestWaiting RequestPhase = "waiting"
	// RequestActing: this agent takes its next step (Text says which).
	RequestActing RequestPhase = "acting"
	// RequestDone: nothing is left to do (Text says why).
	RequestDone RequestPhase = "done"
)

// RequestProgress is what an agent publishes of the request in its
// record: the command follows it and exits with the outcome.
type RequestProgress struct {
	ID    string       `json:"id"`
	Phase RequestPhase `json:"phase"`
	Text  string       `json:"text"`
	// Done are the members this agent defragmented for it: a member is
	// not picked again by the same request (--member would loop on it).
	Done []uint64 `json:"done,omitempty"`
	// Steps are what this agent did for it, in order (a leader move, a
	// defragmentation and its outcome), for the command to print.
	Steps []string `json:"steps,omitempty"`
}
