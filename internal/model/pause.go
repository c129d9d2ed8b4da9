package model

import "time"

// Pause is an operator's hold on the agents (etcdkeeper pause): while it
// is in force no agent changes the cluster, its data or its membership;
// each still restarts its own etcd as it is after a crash and reports.
type Pause struct {
	// ID names this pause among all others (random, written with it): a
	// resume ends the pause it names, never one taken after it.
	ID     string    `json:"id,omitempty"`
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
	// ClusterID is the cluster it was read from (0: local, or unknown).
	ClusterID uint64 `json:"-"`
}

// ResumeMark is the pause a resume reached on a host: over there, even
// while the cluster cannot delete its key (no quorum), or when a recovery
// forced from a member's data brings the key back.
type ResumeMark struct {
	ID        string `json:"id,omitempty"`
	ClusterID uint64 `json:"clusterID,omitempty"`
	Revision  int64  `json:"revision"`
}

// MarkOf is the mark a resume of p leaves.
func MarkOf(p *Pause) ResumeMark {
	if p == nil {
		return ResumeMark{}
	}
	return ResumeMark{ID: p.ID, ClusterID: p.ClusterID, Revision: p.Revision}
}

// Resumed: m ended p. A pause with an ID is the one m names; one without
// (written by an older etcdkeeper) the one at m's very revision of the
// same cluster. Never by order: a cluster's revision can go back (a
// recovery from a member that had applied less, --bump-revision 0), and a
// pause taken since would then be older than the resumed one.
func (p *Pause) Resumed(m ResumeMark) bool {
	switch {
	case p == nil || p.Local:
		return false
	case p.ID != "" || m.ID != "":
		return p.ID == m.ID
	case m.ClusterID != 0 && p.ClusterID != 0 && m.ClusterID != p.ClusterID:
		return false
	}
	return m.Revision != 0 && p.Revision == m.Revision
}

// InForce reports whether the pause holds at now (a nil pause never does).
func (p *Pause) InForce(now time.Time) bool {
	return p != nil && (p.Until.IsZero() || now.Before(p.Until))
}
