package agent

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// rotationSeen is what the pass hands the renewal goroutine for a CA
// rotation: the other agents' records and the operator's clients-ready.
type rotationSeen struct {
	at     time.Time
	agents []model.AgentRecord
	// ready is what the operator said of the clients (nil: nothing).
	ready *cluster.ClientsReady
}

// seenFor is how long what a pass saw stands for the rotation: past it
// (the cluster not reached since), the other members count as missing and
// every step that needs them waits.
const seenFor = 30 * time.Second

// etcdTrustFiles are the trusted CA files etcd reads when it starts.
func etcdTrustFiles(t spec.TLS) []string {
	var out []string
	for _, f := range []string{t.Client.TrustedCAFile, t.Peer.TrustedCAFile} {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// trustFiles are every trusted CA file of the host: etcd's and the
// agent's own.
func trustFiles(t spec.TLS) []string {
	out := etcdTrustFiles(t)
	if f := t.Agent.TrustedCAFile; f != "" && !slices.Contains(out, f) {
		out = append(out, f)
	}
	return out
}

// trustedBy is the CAs every one of files holds (nil when one cannot be
// read, or there are none).
func trustedBy(files []string) []string {
	var out []string
	for i, f := range files {
		ids, err := certs.TrustIDs(f)
		if err != nil {
			return nil
		}
		if i == 0 {
			out = ids
			continue
		}
		out = slices.DeleteFunc(out, func(id string) bool { return !slices.Contains(ids, id) })
	}
	return out
}

// observeRotation runs in the pass: it hands the renewal goroutine the
// agents' records and, when the spec waits for clients, the operator's
// word, and wakes it when they changed.
func (a *Agent) observeRotation(ctx context.Context, in reconcile.Input) {
	s, self := a.Spec()
	if self.TLS.CA.Next.CertFile == "" {
		return
	}
	seen := rotationSeen{at: time.Now(), agents: in.Agents}
	if seen.agents == nil && a.client != nil {
		// The pass reads them only for some decisions; a rotation needs
		// them every pass.
		if recs, err := a.client.Agents(ctx, s.Cluster.Name); err == nil {
			seen.agents = recs
		}
	}
	if self.TLS.CA.Next.WaitForClients && a.client != nil {
		if r, err := a.client.GetClientsReady(ctx, s.Cluster.Name); err == nil {
			seen.ready = r
		}
	}
	a.mu.Lock()
	a.rotationSeen = seen
	a.mu.Unlock()
	select {
	case a.certWake <- struct{}{}:
	default:
	}
}

// rotateRound takes this host's next step of a CA rotation, if the spec
// names one (tls.ca.next), and publishes where the host stands. It runs
// in the renewal goroutine, before the renewals: one writer of the host's
// certificate files.
func (a *Agent) rotateRound(now time.Time) {
	s, self := a.Spec()
	nextFile := self.TLS.CA.Next.CertFile
	if nextFile == "" {
		a.mu.Lock()
		a.caTrust, a.rotation = nil, reconcile.Rotation{}
		a.mu.Unlock()
		return
	}
	next, err := certs.Read(nextFile)
	if err != nil {
		a.noteRotation(reconcile.Rotation{Step: reconcile.RotateWait, Why: "tls.ca.next: " + err.Error()})
		return
	}
	id := certs.CAID(next[0])
	old, oldIDs := oldCAs(self, id)
	own := a.ownTrust(self, next[0])
	a.mu.Lock()
	seen := a.rotationSeen
	a.mu.Unlock()
	hosts := map[string]*model.CATrust{self.Name: own}
	if now.Sub(seen.at) < seenFor {
		for _, r := range seen.agents {
			if r.Name != self.Name && r.CA != nil {
				hosts[r.Name] = r.CA
			}
		}
	}
	ready := seen.ready != nil && seen.ready.CA == id
	rot := reconcile.RotateCA(reconcile.RotationInput{Next: id, Old: oldIDs, Self: self.Name, Members: s.Names(), Hosts: hosts,
		WaitForClients: self.TLS.CA.Next.WaitForClients, ClientsTrust: ready, ClientsCerts: ready && seen.ready.Certs})
	if err := a.rotationStep(rot, self, next[0], old, oldIDs, now); err != nil {
		a.lg.Error("CA rotation step failed", zap.Stringer("step", rot.Step), zap.Error(err))
		rot = reconcile.Rotation{Step: reconcile.RotateWait, Why: fmt.Sprintf("%s failed: %v", rot.Step, err)}
	} else if rot.Step == reconcile.RotateTrust || rot.Step == reconcile.RotateReissue || rot.Step == reconcile.RotateDrop {
		own = a.ownTrust(self, next[0])
	}
	a.mu.Lock()
	a.caTrust = own
	a.mu.Unlock()
	a.noteRotation(rot)
}

// rotationStep carries out a step: file writes only, each idempotent (a
// file that is as the step wants it is left alone), so that an agent
// killed in the middle does the rest next time. The restarts the trust
// changes need are the rollout's: etcd's settings fingerprint its trusted
// CA files.
func (a *Agent) rotationStep(rot reconcile.Rotation, self spec.Member, next *x509.Certificate, old []*x509.Certificate, oldIDs []string, now time.Time) error {
	id := certs.CAID(next)
	var did []string
	switch rot.Step {
	case reconcile.RotateTrust:
		for _, f := range trustFiles(self.TLS) {
			changed, err := certs.AddTrust(f, next)
			if err != nil {
				return err
			}
			if changed {
				did = append(did, f)
			}
		}
	case reconcile.RotateReissue:
		iss, err := certs.LoadIssuer(self.TLS.CA.Next.CertFile, self.TLS.CA.Next.KeyFile)
		if err != nil {
			return fmt.Errorf("tls.ca.next: %w", err)
		}
		for _, l := range self.Leaves() {
			if cs, err := certs.Read(l.CertFile); err != nil || !signedByOne(cs[0], old) {
				continue // not on this host, the new CA's already, or another CA's: left alone
			}
			r, err := certs.Reissue(l, iss, now)
			if err != nil {
				return err
			}
			a.metrics.CertRenewals.WithLabelValues(l.Role).Inc()
			did = append(did, fmt.Sprintf("%s (%s, expires %s)", l.CertFile, l.Role, r.New.NotAfter.UTC().Format(time.RFC3339)))
		}
	case reconcile.RotateDrop:
		for _, f := range trustFiles(self.TLS) {
			changed, err := certs.DropTrust(f, oldIDs)
			if err != nil {
				return err
			}
			if changed {
				did = append(did, f)
			}
		}
	default:
		return nil
	}
	if len(did) > 0 {
		a.lg.Warn("CA rotation: "+rot.Step.String(), zap.String("ca", id), zap.Strings("files", did), zap.String("why", rot.Why))
		a.remember(history.Event{Kind: "ca-rotation", Reason: rot.Why, Detail: map[string]string{"step": rot.Step.String(), "ca": id}})
		a.Wake() // the pass restarts etcd (trust) or re-dials (the agent's CA file)
	}
	return nil
}

// ownTrust is what this host says of its CAs: what its running etcd
// loaded, what its trusted CA files hold, and which CAs issued its
// certificates (next, or one of the CAs its files hold).
func (a *Agent) ownTrust(self spec.Member, next *x509.Certificate) *model.CATrust {
	a.mu.Lock()
	running := slices.Clone(a.etcdTrust)
	a.mu.Unlock()
	t := &model.CATrust{Running: running, Files: trustedBy(trustFiles(self.TLS))}
	known := []*x509.Certificate{next}
	for _, f := range append(trustFiles(self.TLS), self.TLS.CA.CertFile) {
		if cs, err := certs.Read(f); err == nil {
			known = append(known, cs...)
		}
	}
	for _, l := range self.Leaves() {
		cs, err := certs.Read(l.CertFile)
		if err != nil {
			continue
		}
		id := "?"
		for _, ca := range known {
			if cs[0].CheckSignatureFrom(ca) == nil {
				id = certs.CAID(ca)
				break
			}
		}
		if !slices.Contains(t.Issuers, id) {
			t.Issuers = append(t.Issuers, id)
		}
	}
	return t
}

// oldCAs are the CA a rotation to next replaces: the one tls.ca's key
// belongs to (its certificate file may already have dropped it, as
// kubeadm's ca.crt does, being a trusted CA file too), found among
// tls.ca.certFile and the trusted CA files; without the key on the host,
// every CA of tls.ca.certFile but next. ids are theirs, and the key's
// even once no file holds its certificate: the running etcd may still
// trust it until its restart.
func oldCAs(self spec.Member, next string) (out []*x509.Certificate, ids []string) {
	keyID, keyErr := certs.KeyCAID(self.TLS.CA.KeyFile)
	seen := map[string]bool{next: true}
	if keyErr == nil && keyID != next {
		ids = append(ids, keyID)
	}
	files := append([]string{self.TLS.CA.CertFile}, trustFiles(self.TLS)...)
	for i, f := range files {
		cs, err := certs.Read(f)
		if err != nil {
			continue
		}
		for _, c := range cs {
			id := certs.CAID(c)
			mine := keyErr == nil && id == keyID || keyErr != nil && i == 0
			if mine && !seen[id] {
				seen[id] = true
				out = append(out, c)
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	return out, ids
}

func signedByOne(c *x509.Certificate, cas []*x509.Certificate) bool {
	return slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return c.CheckSignatureFrom(ca) == nil })
}

// noteRotation keeps the rotation's step for status and logs it when it
// changes.
func (a *Agent) noteRotation(rot reconcile.Rotation) {
	a.mu.Lock()
	prev := a.rotation
	a.rotation = rot
	a.mu.Unlock()
	if prev != rot {
		a.lg.Info("CA rotation", zap.Stringer("step", rot.Step), zap.String("why", rot.Why))
	}
}
