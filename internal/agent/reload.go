package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Watch debounce and fallback poll for the spec file.
const (
	specDebounce = 150 * time.Millisecond
	specPoll     = 30 * time.Second
)

// RequestReload asks the loop to re-read the spec file (SIGHUP) and wakes
// it. The reload is announced to systemd (RELOADING=1, then READY=1)
// whether or not the file changed: `systemctl reload` may come after the
// file watch already applied the edit.
func (a *Agent) RequestReload() {
	a.reloadAnnounce.Store(true)
	a.requestLook()
}

// requestLook is RequestReload for a file event or the periodic poll: the
// reload is announced only when a new spec is applied, so the 30 s poll
// is not a heartbeat in systemd's log.
func (a *Agent) requestLook() {
	a.reloadReq.Store(true)
	a.Wake()
}

// watchSpec turns changes of the spec file into reload requests.
func (a *Agent) watchSpec(ctx context.Context) {
	s, _ := a.Spec()
	if err := spec.Watch(ctx, s.Path, specDebounce, specPoll, a.requestLook); err != nil {
		a.lg.Error("spec watch failed; SIGHUP still reloads", zap.Error(err))
	}
}

// reload reads the spec again. A valid changed spec is applied at once; an
// invalid one is reported (once per distinct error) and the last good spec
// stays in force. The agent and etcd keep running either way.
func (a *Agent) reload() {
	if !a.reloadReq.Swap(false) {
		return
	}
	cur, curSelf := a.Spec()
	announced := a.reloadAnnounce.Swap(false)
	if announced {
		a.notify.Reloading()
		defer a.notify.Reloaded()
	}
	s, err := spec.Load(cur.Path)
	if err != nil {
		if err.Error() != a.lastSpecErr {
			a.lastSpecErr = err.Error()
			a.lg.Error("spec rejected: keeping the last good spec", zap.String("generation", cur.Generation),
				zap.Strings("errors", strings.Split(err.Error(), "\n")))
			a.countReload(false)
		}
		return
	}
	a.lastSpecErr = ""
	if s.Generation == cur.Generation {
		return
	}
	if !announced {
		a.notify.Reloading()
		defer a.notify.Reloaded()
	}
	self, inSpec := s.Lookup(curSelf.Name)
	if !inSpec {
		// Keep where our data lives: the member may still have to be
		// stopped and its data moved aside.
		self = curSelf
	}
	a.mu.Lock()
	a.spec, a.self, a.inSpec = s, self, inSpec
	a.mu.Unlock()
	a.metrics.SetCertificates(self.Name, self.TLS.CertFiles())
	// The agent's record is updated in place by the next pass (its spec
	// generation and members): revoking it would leave a moment in which
	// no record of this agent exists, and another agent with an older
	// spec could take that for "nobody still wants this member". Only a
	// change in how to reach the cluster needs a new client, and so a new
	// record under a new lease.
	if dialKey(cur, curSelf) != dialKey(s, self) {
		a.releaseLock(context.Background()) // while the old client still reaches the cluster
		if a.presence != nil {
			_ = a.presence.Close()
			a.presence = nil
		}
		if a.client != nil {
			_ = a.client.Close()
			a.client = nil
		}
	}
	a.countReload(true)
	a.lg.Info("spec applied", zap.String("from", cur.Generation), zap.String("to", s.Generation),
		zap.Strings("members", s.Names()), zap.Bool("self-in-spec", inSpec))
}

func (a *Agent) countReload(ok bool) {
	result := "failed"
	if ok {
		result = "ok"
	}
	a.metrics.ConfigReloads.WithLabelValues(result).Inc()
	a.updateStatus(func(st *Status) {
		if ok {
			st.ReloadsOK++
		} else {
			st.ReloadsFailed++
		}
	})
}

// dialKey is what the cluster client is made from: the peers' client
// URLs, TLS and credentials.
func dialKey(s *spec.Spec, self spec.Member) string {
	return fmt.Sprintf("%v|%+v|%s", peerEndpointsOf(s, self), self.TLS.Agent, s.Auth.CredentialsFile)
}
