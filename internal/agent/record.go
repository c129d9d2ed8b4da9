package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/etcdkeeper/etcdkeeper/internal/certs"
	"github.com/etcdkeeper/etcdkeeper/internal/cluster"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// record keeps what the pass learned about the local member: its identity
// in the marker (the proof that this host was a member), its agent record
// in the cluster, and — once it serves as a voter with a leader — that
// etcd is settled.
func (a *Agent) record(ctx context.Context, ans *model.Answer) error {
	if ans == nil {
		if r := a.Status().Recovery; r != nil && r.Open() && r.Role == recovery.RoleSource {
			// No cluster to publish to until this member serves it: each
			// try would wait out its deadline and slow the recovery.
			return nil
		}
		if a.etcd.Running() || a.offlineShown {
			// A starting member has no answer yet, but its record tells the
			// others how far its data has come; one stopped for its
			// offline defragmentation keeps saying so (its record's lease
			// would run out before the member is back).
			a.publish(ctx)
		}
		return nil
	}
	// A marker that cannot be written is reported (noteWrite); the rest
	// of the record does not depend on it.
	err := a.recordMarker(ans.ClusterID, ans.MemberID)
	if ans.Leader != 0 {
		// Without a leader the cluster takes no write: publishing would
		// only wait out its deadline (and delay a recovery's first step).
		a.publish(ctx)
	}
	if ans.ServingVoter() {
		a.etcd.Stable()
		a.lastExit = nil
		a.settling = false
	}
	return err
}

func (a *Agent) recordMarker(clusterID, memberID uint64) error {
	m, err := a.loadMarker()
	if err != nil {
		return err
	}
	_, self := a.Spec()
	dev := deviceOf(self.DataDir)
	if m != nil && m.ClusterID == clusterID && m.MemberID == memberID && m.DataDev == dev {
		return nil
	}
	if err := a.saveMarker(model.Marker{ClusterID: clusterID, MemberID: memberID, DataDev: dev}); err != nil {
		return fmt.Errorf("recording membership: %w", err)
	}
	a.lg.Info("member identity recorded", zap.String("cluster-id", fmt.Sprintf("%x", clusterID)), zap.String("member-id", fmt.Sprintf("%x", memberID)))
	return nil
}

// publish keeps this agent's record in the cluster current: its spec, its
// phase and its last decision.
func (a *Agent) publish(ctx context.Context) {
	s, self := a.Spec()
	if a.presence != nil && !a.presence.Alive() {
		_ = a.presence.Close()
		a.presence = nil
	}
	if a.presence == nil {
		p, err := a.client.NewPresence(ctx)
		if err != nil {
			return
		}
		a.presence = p
	}
	st := a.Status()
	rec := model.AgentRecord{Name: self.Name, Generation: s.Generation, Members: s.Names(), Phase: string(st.Phase),
		Decision: st.Decision, Addr: self.AgentAddr, MemberID: a.memberID(), Progress: a.progress(st), Maintenance: st.Maintenance, Defragmenting: st.Defragmenting,
		RestartPending: a.restartPending, RestartAgent: a.restartAgent, RolloutSnapshot: a.rolloutSnapshot, Version: a.build().Version, EtcdVersion: a.etcdVersion(),
		Rollout: a.rollout, Request: a.request, Paused: st.Paused, PausedLocal: st.PausedLocal, Certs: st.Certs, CA: st.CA, Rotation: st.Rotation}
	if a.etcd.Running() {
		rec.Disk = a.disk.published
	}
	rec.DefragOffline = a.defragsOffline()
	if w := st.TurnWish; w != nil && !w.Granted {
		rec.WantsTurn = w.Why
	}
	if b := st.Backup; b != nil {
		rec.Backup = b.Encryption
		if d := b.LastDrill; d != nil {
			rec.RestoreDrill = d.Line()
		}
	}
	if err := a.presence.Publish(ctx, s.Cluster.Name, rec); err != nil {
		a.lg.Debug("publish agent record", zap.Error(err))
	}
}

// peerEndpoints are the client URLs of the spec's other members (of this
// one, in a one-member cluster).
func (a *Agent) peerEndpoints() []string {
	s, self := a.Spec()
	return peerEndpointsOf(s, self)
}

func peerEndpointsOf(s *spec.Spec, self spec.Member) []string {
	var eps []string
	for _, m := range s.Members {
		if m.Name != self.Name || len(s.Members) == 1 {
			eps = append(eps, m.ClientURLs...)
		}
	}
	return eps
}

// peerURLs are every client and peer URL of the spec's other members (of
// this one, in a one-member cluster).
func (a *Agent) peerURLs() []string {
	urls := a.peerEndpoints()
	for _, m := range a.peers() {
		urls = append(urls, m.PeerURLs...)
	}
	return urls
}

// peers are the spec's other members.
func (a *Agent) peers() []spec.Member {
	s, self := a.Spec()
	var out []spec.Member
	for _, m := range s.Members {
		if m.Name != self.Name {
			out = append(out, m)
		}
	}
	return out
}

// ensureClient dials the peers named in the spec.
func (a *Agent) ensureClient() error {
	if a.client != nil {
		return nil
	}
	s, self := a.Spec()
	caPrint := agentCAPrint(self) // before the dial reads the file: a change after is seen
	c, err := cluster.DialSpec(s, self, a.peerEndpoints())
	if err != nil {
		return err
	}
	a.client = c
	a.clientCA = caPrint
	return nil
}

// agentCAPrint fingerprints the CA the agent's client trusts, which it
// reads when it dials ("" when it names none).
func agentCAPrint(self spec.Member) string {
	if f := self.TLS.Agent.TrustedCAFile; f != "" {
		return certs.Fingerprint([]string{f})
	}
	return ""
}

// redialOnNewCA drops the cluster client when the CA file it trusts has
// changed (a CA rotation added or dropped a CA), so that the next pass
// dials with it; not while the agent holds the lock, which goes with the
// client's session.
func (a *Agent) redialOnNewCA() {
	_, self := a.Spec()
	if a.client == nil || a.lock != nil || agentCAPrint(self) == a.clientCA {
		return
	}
	a.lg.Info("the agent's trusted CA file changed: connecting again with it", zap.String("file", self.TLS.Agent.TrustedCAFile))
	if a.presence != nil {
		_ = a.presence.Close()
		a.presence = nil
	}
	_ = a.client.Close()
	a.client = nil
}

// memberID is this host's member: the one its etcd answers as, or the one
// an open rejoin added.
func (a *Agent) memberID() uint64 {
	st := a.Status()
	var id uint64
	if _, err := fmt.Sscanf(st.MemberID, "%x", &id); err == nil && id != 0 && a.etcd.Running() {
		return id
	}
	if j, err := a.loadJournal(); err == nil && j.Open() {
		return j.NewMemberID
	}
	return 0
}

// progress is the evidence that the local member catches up: its data
// dir's size (a snapshot arriving) and its applied raft index.
func (a *Agent) progress(st Status) string {
	if st.Healthy {
		return "" // a voter is not catching up: nothing to report, nothing to rewrite every pass
	}
	_, self := a.Spec()
	return fmt.Sprintf("data %d bytes, applied %d", dataBytes(self.DataDir), st.Applied)
}

// deviceOf is the device (filesystem) path is on, or its parent's when
// path does not exist; 0 when neither can be read.
func deviceOf(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err == nil {
		return st.Dev
	}
	if err := unix.Stat(filepath.Dir(path), &st); err == nil {
		return st.Dev
	}
	return 0
}

// unmounted says why the data dir looks like a mount point without its
// filesystem, or "" (reconcile.Unmounted).
func unmounted(dataDir string, m *model.Marker) string {
	if m == nil {
		return ""
	}
	current, parent := deviceOf(dataDir), deviceOf(filepath.Dir(dataDir))
	if !reconcile.Unmounted(m.DataDev, current, parent) {
		return ""
	}
	return fmt.Sprintf("%s is on the filesystem of its parent (device %x), while member %x ran on device %x", dataDir, current, m.MemberID, m.DataDev)
}

// etcdVersion is the version of the etcd this agent runs ("": none).
func (a *Agent) etcdVersion() string {
	if a.binary == nil || !a.etcd.Running() {
		return ""
	}
	return a.binary.Version.String()
}
