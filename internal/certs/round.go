package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// CA names the CA files of tls.ca.
type CA struct {
	CertFile, KeyFile string
}

// Options is how a round of renewals runs.
type Options struct {
	// Before is tls.renew.before (0: RenewAt's default).
	Before time.Duration
	// Check only: say where each certificate stands, renew nothing.
	Check bool
	// Force renews every certificate the CA issued, due or not
	// (`certs renew --force`).
	Force bool
}

// Round is the outcome of one round: each certificate's status (in the
// order of the leaves), what was renewed, what failed, and when the next
// renewal is due (zero: none is).
type Round struct {
	Status  []model.CertStatus
	Renewed []Renewal
	Failed  []Failure
	Next    time.Time
}

// Failure is a renewal that failed: the leaf's role ("ca" when the CA
// itself cannot be used) and why.
type Failure struct {
	Role string
	Err  error
}

// Renewals reads each leaf and renews those that are due, each with the
// CA of cas that issued it (tls.ca, and during a rotation tls.ca.next). A
// CA without its key on this host renews nothing: each status then says
// so, and why. A CA key that cannot be used is a failure, unless another
// of cas can (a rotated-out CA whose certificate left its file).
func Renewals(leaves []Leaf, cas []CA, opt Options, now time.Time) Round {
	var r Round
	var loaded []*Issuer
	nothing := "nothing: the spec names no tls.ca"
	var errs []error
	for i, ca := range cas {
		iss, why, err := issuerOf(ca)
		if iss != nil {
			loaded = append(loaded, iss)
		}
		if i == 0 {
			nothing = why
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(loaded) == 0 {
		for _, err := range errs {
			r.Failed = append(r.Failed, Failure{Role: "ca", Err: err})
		}
	}
	for _, l := range leaves {
		var iss *Issuer
		st := model.CertStatus{Role: l.Role, Path: l.CertFile, RenewedBy: nothing}
		chain, err := Read(l.CertFile)
		if err != nil {
			st.Absent = errors.Is(err, fs.ErrNotExist)
			st.Error = err.Error()
			r.Status = append(r.Status, st)
			continue
		}
		describe(&st, chain[0])
		switch {
		case chain[0].IsCA:
			st.RenewedBy = "nothing: a CA is not renewed but rotated, before it expires (docs/certificates.md)"
		case len(loaded) > 0:
			iss = issuedBy(chain[0], loaded)
			if iss == nil {
				st.RenewedBy = fmt.Sprintf("nothing: issued by %q, not by tls.ca %q", chain[0].Issuer.CommonName, loaded[0].Cert.Subject.CommonName)
			} else {
				st.RenewedBy = "the agent, with tls.ca"
				st.RenewAt = RenewAt(chain[0], opt.Before)
			}
		}
		if !st.RenewAt.IsZero() && !opt.Check && (opt.Force || !now.Before(st.RenewAt)) {
			done, err := Renew(l, iss, now)
			if err != nil {
				st.Error = err.Error()
				r.Failed = append(r.Failed, Failure{Role: l.Role, Err: fmt.Errorf("renew the %s certificate: %w", l.Role, err)})
			} else {
				r.Renewed = append(r.Renewed, done)
				describe(&st, done.New)
				st.RenewAt, st.Renewed = RenewAt(done.New, opt.Before), now
			}
		}
		if !st.RenewAt.IsZero() && (r.Next.IsZero() || st.RenewAt.Before(r.Next)) {
			r.Next = st.RenewAt
		}
		r.Status = append(r.Status, st)
	}
	return r
}

// issuedBy is the one of cas that issued c (nil: none).
func issuedBy(c *x509.Certificate, cas []*Issuer) *Issuer {
	for _, iss := range cas {
		if c.CheckSignatureFrom(iss.Cert) == nil {
			return iss
		}
	}
	return nil
}

// issuerOf loads the CA; without it, nothing says why nothing renews. A
// CA key that is on the host but cannot be used (exposed, not the CA's)
// is an error too: renewal was asked for and fails.
func issuerOf(ca CA) (iss *Issuer, nothing string, err error) {
	const byHand = " (renew by hand: etcdkeeper certs renew --ca-key FILE)"
	switch {
	case ca.CertFile == "":
		return nil, "nothing: the spec names no tls.ca", nil
	case ca.KeyFile == "":
		return nil, "nothing: the spec names no tls.ca.keyFile" + byHand, nil
	}
	iss, err = LoadIssuer(ca.CertFile, ca.KeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "nothing: the CA key " + ca.KeyFile + " is not on this host" + byHand, nil
	case err != nil:
		return nil, "nothing: " + err.Error(), fmt.Errorf("tls.ca: %w", err)
	}
	return iss, "", nil
}

// describe fills what st shows of c.
func describe(st *model.CertStatus, c *x509.Certificate) {
	st.Subject = c.Subject.String()
	st.Names = Names(c)
	st.Issuer = c.Issuer.String()
	st.NotAfter = c.NotAfter
}
