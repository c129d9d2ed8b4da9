package model

import "time"

// Pause is an operator's hold on the agents (etcdkeeper pause): while it
// is in force no agent changes the cluster, its data or its membership;
// each still restarts its own etcd as it is after a crash and reports.
type Pause struct {
	By     string    `json:"by"` // user@host that took it
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// Until is when it ends by itself, on the clock of the host that took
	// it; zero: at etcdkeeper resume.
	Until time.Time `json:"until,omitzero"`
	// Local: kept in this host's state dir (taken while the cluster had no
	// quorum to hold it), not read from the cluster.
	Local bool `json:"-"`
	// Revision is the cluster's revision of the key when it was written
	// (its ModRevision; 0 for a local pause): the cluster's own order of
	// pauses, free of any host's clock.
	Revision int64 `json:"-"`
}

// InForce reports whether the pause holds at now (a nil pause never does).
func (p *Pause) InForce(now time.Time) bool {
	return p != nil && (p.Until.IsZero() || now.Before(p.Until))
}
