package reconcile

import (
	"fmt"
	"slices"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// RotationStep is a host's next step in a CA rotation.
type RotationStep int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=RotationStep -trimprefix=Rotate -linecomment
const (
	RotateNone    RotationStep = iota // none
	RotateTrust                       // trust both
	RotateReissue                     // reissue
	RotateDrop                        // drop the old CA
	RotateWait                        // wait
	RotateDone                        // done
)

// Rotation is a host's next step in a CA rotation and why.
type Rotation struct {
	Step RotationStep
	Why  string
}

// RotationInput is what the rotation decides on: the new CA and the old
// one it replaces (certs.CAID; other CAs the files trust are left alone),
// this host's member, every member of the spec with what each host says
// (self's from its own files, the others' from their agents' records; a
// member without one is missing), and, with WaitForClients, what the
// operator said of the clients: they trust the new CA (ClientsTrust, before
// the reissue), they present its certificates (ClientsCerts, before the
// drop).
type RotationInput struct {
	Next                       string
	Old                        []string
	Self                       string
	Members                    []string
	Hosts                      map[string]*model.CATrust
	WaitForClients             bool
	ClientsTrust, ClientsCerts bool
}

// RotateCA is this host's next step of a rotation to the CA in.Next, in
// three phases read from the certificates themselves, so that an agent
// killed at any point resumes where its files stand:
//
//  1. trust both: the host's trusted CA files get the new CA beside the
//     old; etcd reads them at start, so its member then restarts, as any
//     settings change, one member at a time through the disruption budget;
//  2. reissue: once every member's running etcd trusts the new CA (and,
//     with WaitForClients, the operator said the clients do), the host's
//     certificates are issued by the new CA, keeping their keys: no
//     restart, and every peer already trusts them;
//  3. drop the old CA: once every member's certificates are the new CA's,
//     the trusted CA files keep only it; a restart again, through the
//     budget.
//
// A step that needs the other members waits, with the reason, while one of
// them has no record (down, or its agent not running) or is behind: no
// member ever presents a certificate that a member it talks to does not
// trust.
func RotateCA(in RotationInput) Rotation {
	if in.Next == "" {
		return Rotation{Step: RotateNone}
	}
	self := in.Hosts[in.Self]
	if self == nil {
		return Rotation{RotateWait, "this host's own certificates cannot be read"}
	}
	if !slices.Contains(self.Files, in.Next) {
		return Rotation{RotateTrust, "the trusted CA files get the new CA beside the old"}
	}
	old := func(id string) bool { return slices.Contains(in.Old, id) }
	if slices.ContainsFunc(self.Issuers, old) {
		for _, m := range in.Members {
			h := in.Hosts[m]
			switch {
			case h == nil:
				return Rotation{RotateWait, m + " has no record (down, or its agent not running): its certificates are issued by the new CA only once every member trusts it"}
			case !slices.Contains(h.Running, in.Next):
				return Rotation{RotateWait, m + "'s etcd does not trust the new CA yet (it restarts with both, one member at a time)"}
			}
		}
		if in.WaitForClients && !in.ClientsTrust {
			return Rotation{RotateWait, "every member trusts both CAs; waiting for `etcdkeeper certs rotate-ca --clients-ready` (tls.ca.next.waitForClients): restart the clients that read the CA at start first"}
		}
		return Rotation{RotateReissue, "every member trusts the new CA: this host's certificates are issued by it"}
	}
	if slices.ContainsFunc(self.Files, old) {
		for _, m := range in.Members {
			h := in.Hosts[m]
			switch {
			case h == nil:
				return Rotation{RotateWait, m + " has no record (down, or its agent not running): the old CA is dropped only once every member's certificates are the new CA's"}
			case len(h.Issuers) == 0 || slices.ContainsFunc(h.Issuers, old):
				return Rotation{RotateWait, m + "'s certificates are not all the new CA's yet"}
			}
		}
		if in.WaitForClients && !in.ClientsCerts {
			return Rotation{RotateWait, "every member presents the new CA's certificates; waiting for `etcdkeeper certs rotate-ca --clients-ready` once more (tls.ca.next.waitForClients): give every other client a certificate of the new CA first"}
		}
		return Rotation{RotateDrop, "every member's certificates are the new CA's: the trusted CA files drop the old one"}
	}
	if slices.ContainsFunc(self.Running, old) {
		return Rotation{RotateWait, "etcd still trusts the old CA: it restarts with the new one only, one member at a time"}
	}
	return Rotation{RotateDone, fmt.Sprintf("this host trusts and presents only the new CA %s", in.Next)}
}
