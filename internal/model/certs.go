package model

import "time"

// CertStatus is where one certificate of a host stands: what `certs
// status`, the agent's /status and its record in the cluster show.
type CertStatus struct {
	// Member is the member whose host keeps it; Role what it is for
	// (client, peer, agent, ca, or the name of one of tls.renew.others).
	Member string `json:"member,omitempty"`
	Role   string `json:"role"`
	Path   string `json:"path"`
	// Subject, Names (its SANs) and Issuer are as certs.Names and the
	// certificate's common names say them.
	Subject  string    `json:"subject,omitempty"`
	Names    string    `json:"names,omitempty"`
	Issuer   string    `json:"issuer,omitempty"`
	NotAfter time.Time `json:"notAfter,omitzero"`
	// RenewAt is when the agent renews it (zero: nothing renews it);
	// RenewedBy says who renews it, or "nothing" and why.
	RenewAt   time.Time `json:"renewAt,omitzero"`
	RenewedBy string    `json:"renewedBy"`
	// Renewed is when this agent last renewed it; Error why its last
	// renewal, or reading it, failed ("" once it succeeds).
	Renewed time.Time `json:"renewed,omitzero"`
	Error   string    `json:"error,omitempty"`
	// Absent: the file is not on this host (one of tls.renew.others that
	// this host does not have).
	Absent bool `json:"absent,omitempty"`
}

// CATrust is what a host says of its CAs, for a CA rotation (certs.CAID
// each): the CAs its running etcd loaded when it started (nil: etcd not
// running), those its trusted CA files hold now (every one of them), and
// those that issued its certificates ("?" for one issued by a CA it does
// not know).
type CATrust struct {
	Running []string `json:"running,omitempty"`
	Files   []string `json:"files,omitempty"`
	Issuers []string `json:"issuers,omitempty"`
}

// RotationNote is a host's step of a CA rotation: Step is the kind
// (reconcile.RotationStep: "trust both", "reissue", "drop the old CA",
// "wait", "done"), Why for people.
type RotationNote struct {
	Step string `json:"step"`
	Why  string `json:"why,omitempty"`
}
