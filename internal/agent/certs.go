package agent

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// Renewal's timing: a round every renewCheck at least (a spec reload, a
// certificate replaced by hand, a CA key put on the host are seen then),
// at its time when a certificate is due sooner; one due that failed is
// tried again after renewRetry.
const (
	renewCheck = 30 * time.Second
	renewRetry = 30 * time.Second
)

// startRenewal keeps this host's certificates renewed in a goroutine of
// its own: a renewal waits for no pass and no quorum (a cluster that lost
// its quorum needs valid certificates to come back), and no pass waits for
// it. It disrupts nothing: etcd and the agent read a renewed certificate
// at their next handshake. The returned stop ends it and waits for it.
func (a *Agent) startRenewal(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := map[string]string{} // role → last error logged
		for {
			a.rotateRound(time.Now())
			wait := a.renewRound(time.Now(), failed)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			case <-a.certWake:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// renewRound runs one round of renewals with the spec in force, records
// where each certificate stands and returns how long until the next.
func (a *Agent) renewRound(now time.Time, failed map[string]string) time.Duration {
	s, self := a.Spec()
	r := certs.Renewals(self.Leaves(), self.TLS.RenewCAs(), certs.Options{Before: s.TLS.Renew.Before.Duration}, now)
	for i := range r.Status {
		r.Status[i].Member = self.Name
	}
	for _, done := range r.Renewed {
		a.metrics.CertRenewals.WithLabelValues(done.Role).Inc()
		a.lg.Info("certificate renewed", zap.String("role", done.Role), zap.String("path", pathOf(r.Status, done.Role)),
			zap.Time("old-not-after", done.Old.NotAfter), zap.Time("not-after", done.New.NotAfter),
			zap.String("serial", done.New.SerialNumber.Text(16)))
	}
	still := map[string]bool{}
	for _, f := range r.Failed {
		still[f.Role] = true
		a.metrics.CertRenewalFailures.WithLabelValues(f.Role).Inc()
		if failed[f.Role] != f.Err.Error() { // a new failure, or another one: said once
			failed[f.Role] = f.Err.Error()
			a.lg.Error("certificate renewal failed", zap.String("role", f.Role), zap.Error(f.Err))
		}
	}
	for role := range failed {
		if !still[role] {
			delete(failed, role)
		}
	}
	a.mu.Lock()
	a.certs = keepRenewed(r.Status, a.certs)
	a.mu.Unlock()
	switch due := r.Next.Sub(now); {
	case r.Next.IsZero():
		return renewCheck
	case due <= 0: // due and not renewed: it failed
		return renewRetry
	default:
		return min(renewCheck, due+time.Millisecond)
	}
}

func pathOf(sts []model.CertStatus, role string) string {
	for _, st := range sts {
		if st.Role == role {
			return st.Path
		}
	}
	return ""
}

// keepRenewed carries the time of each certificate's last renewal over
// from the previous round.
func keepRenewed(sts, prev []model.CertStatus) []model.CertStatus {
	for i := range sts {
		if !sts[i].Renewed.IsZero() {
			continue
		}
		for _, p := range prev {
			if p.Role == sts[i].Role && p.Path == sts[i].Path {
				sts[i].Renewed = p.Renewed
			}
		}
	}
	return sts
}
