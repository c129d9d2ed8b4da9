package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/backup"
	"github.com/etcdkeeper/etcdkeeper/internal/metrics"
	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/reconcile"
	"github.com/etcdkeeper/etcdkeeper/internal/recovery"
	"github.com/etcdkeeper/etcdkeeper/internal/repair"
)

// Status is the agent's view of its member, for logs, /status and systemd.
type Status struct {
	Member        string      `json:"member"`
	Cluster       string      `json:"cluster"`
	Phase         model.Phase `json:"phase"`
	Decision      string      `json:"decision"`
	LastError     string      `json:"lastError,omitempty"`
	MemberID      string      `json:"memberID,omitempty"`
	ClusterID     string      `json:"clusterID,omitempty"`
	Leader        string      `json:"leader,omitempty"`
	Role          string      `json:"role,omitempty"`
	IsLearner     bool        `json:"isLearner"`
	Applied       uint64      `json:"applied,omitempty"`
	Healthy       bool        `json:"healthy"`
	EtcdPID       int         `json:"etcdPID,omitempty"`
	Restarts      int         `json:"restarts"`
	LastExit      string      `json:"lastExit,omitempty"`
	LastExitClass string      `json:"lastExitClass,omitempty"`
	RejoinStep    string      `json:"rejoinStep,omitempty"`
	LeaderName    string      `json:"leaderName,omitempty"`
	Voters        int         `json:"voters"`
	HealthyVoters int         `json:"healthyVoters"`
	// Quorum: a quorum of every voter was healthy (model.View.HasQuorum).
	Quorum bool `json:"quorum"`
	// Paused: an operator's pause holds the agent; PausedLocal: one kept
	// on this host (taken without quorum).
	Paused         bool            `json:"paused,omitempty"`
	PausedLocal    bool            `json:"pausedLocal,omitempty"`
	Members        []MemberSummary `json:"members,omitempty"`
	Alarms         []string        `json:"alarms,omitempty"`
	SpecGeneration string          `json:"specGeneration"`
	ReloadsOK      int             `json:"reloadsOK"`
	ReloadsFailed  int             `json:"reloadsFailed"`
	LastPass       time.Time       `json:"lastPass"`
	// Passes counts the loop's passes since the agent started.
	Passes int64 `json:"passes"`
	// Backup is the scheduled snapshots' state (nil before they start).
	Backup *backup.State `json:"backup,omitempty"`
	// Certs is where this host's certificates stand: when each expires,
	// when and by whom it is renewed, the last renewal's error.
	Certs []model.CertStatus `json:"certs,omitempty"`
	// CA and Rotation: during a CA rotation, what this host says of its
	// CAs and its next step ("trust both", "reissue", "drop the old CA",
	// "wait", "done") and why.
	CA       *model.CATrust      `json:"ca,omitempty"`
	Rotation *model.RotationNote `json:"rotation,omitempty"`
	// Turn is the cluster's host turn as last read (nil: nobody holds
	// it); TurnWish this host's wish for one (etcdkeeper guard,
	// maintenance start; nil: none).
	Turn     *model.HostTurn `json:"turn,omitempty"`
	TurnWish *model.TurnWish `json:"turnWish,omitempty"`
	// Disk is what this agent measured of its member's disk (nil: not
	// yet); SlowDisks the members whose disks the agents' records show
	// far slower than the others' (model.View.SlowDisks).
	Disk      *DiskMeasure     `json:"disk,omitempty"`
	SlowDisks []model.SlowDisk `json:"slowDisks,omitempty"`
	// RaftTerm, RaftIndex (committed) and Revision are what the local etcd
	// last answered: how far its data goes, for a recovery plan.
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	Revision  int64  `json:"revision,omitempty"`
	// Recovery is this host's part in a recovery from quorum loss, the
	// last one it took part in (nil: none).
	Recovery *recovery.Journal `json:"recovery,omitempty"`
	// Version and EtcdVersion are the build this agent runs; Installed
	// the build at its path when a package upgrade replaced the file and
	// this host's turn has not come (or its etcd was refused),
	// InstalledErr why the replaced file cannot be run yet.
	Version      string       `json:"version,omitempty"`
	EtcdVersion  string       `json:"etcdVersion,omitempty"`
	Installed    *model.Build `json:"installed,omitempty"`
	InstalledErr string       `json:"installedError,omitempty"`
	// StateDirError is why a file of the state dir cannot be written
	// ("": every write went through).
	StateDirError string `json:"stateDirError,omitempty"`
	// RecoveryFinishError is why the end of this host's part in a
	// recovery cannot be recorded ("": it could, or there is none).
	RecoveryFinishError string `json:"recoveryFinishError,omitempty"`
	// FenceStale: Recovery fences this host and its source has not
	// started after recovery.FenceStaleAfter (etcdkeeper_recovery_fence_stale).
	FenceStale bool `json:"fenceStale,omitempty"`
	// Rollout is where a rolling restart stands (reconcile.RolloutText;
	// "": none).
	Rollout string `json:"rollout,omitempty"`
	// Maintenance is the maintenance this agent runs now ("defragmenting
	// node2 since 02:00:01, deadline 1m0s"; "": none).
	Maintenance string `json:"maintenance,omitempty"`
	// Defragmenting is the member ID Maintenance defragments (0: none).
	Defragmenting uint64 `json:"-"`
	// NoSpace is the NOSPACE procedure's state as this agent last decided
	// ("": no NOSPACE); NoSpaceFull, when the data in use fills the quota,
	// why the alarm stays ("data in use 1.9 GiB of a 2.0 GiB quota on
	// node1: raise etcd quota-backend-bytes or delete data ...").
	NoSpace     string `json:"nospace,omitempty"`
	NoSpaceFull string `json:"nospaceFull,omitempty"`
}

// Status returns a copy of the agent's status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.status
	st.FenceStale = recovery.FenceStale(st.Recovery, time.Now())
	if a.backups != nil {
		b := a.backups.State()
		st.Backup = &b
	}
	st.Certs = append([]model.CertStatus(nil), a.certs...)
	st.CA = a.caTrust
	if a.rotation.Step != reconcile.RotateNone {
		st.Rotation = &model.RotationNote{Step: a.rotation.Step.String(), Why: a.rotation.Why}
	}
	return st
}

func (a *Agent) setDecision(said string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.Member = a.self.Name
	a.status.Cluster = a.spec.Cluster.Name
	a.status.SpecGeneration = a.spec.Generation
	a.status.Decision = said
	a.status.LastPass = time.Now()
	a.status.Passes++
	if err != nil {
		a.status.LastError = err.Error()
	}
}

func (a *Agent) updateStatus(f func(*Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.status)
}

// noteAnswer records what the local member's status said.
func (a *Agent) noteAnswer(ans model.Answer) {
	healthy := ans.ServingVoter()
	role := "voter"
	switch {
	case ans.IsLearner:
		role = "learner"
	case ans.Leader == ans.MemberID:
		role = "leader"
	}
	a.updateStatus(func(s *Status) {
		s.MemberID, s.ClusterID = fmt.Sprintf("%x", ans.MemberID), fmt.Sprintf("%x", ans.ClusterID)
		s.Leader = fmt.Sprintf("%x", ans.Leader)
		s.IsLearner = ans.IsLearner
		s.Applied = ans.Applied
		s.Healthy = healthy
		s.Role = role
	})
	a.metrics.SetRole(role)
	if healthy {
		a.metrics.MemberHealthy.Set(1)
	} else {
		a.metrics.MemberHealthy.Set(0)
	}
}

func (a *Agent) setPhase(p model.Phase) { a.updateStatus(func(s *Status) { s.Phase = p }) }

// noteView records the cluster as last observed.
func (a *Agent) noteView(v model.Cluster) {
	view := model.NewView(v, nil)
	voters, healthy := view.Voters, view.Serving
	quorum, _ := view.HasQuorum()
	leader := ""
	if m, ok := v.Member(v.LeaderID); ok {
		leader = m.Name
	}
	a.metrics.ClusterVoters.Set(float64(voters))
	a.metrics.ClusterHealthy.Set(float64(healthy))
	a.updateStatus(func(s *Status) {
		s.Voters, s.HealthyVoters, s.Quorum, s.LeaderName = voters, healthy, quorum, leader
		s.Members, s.Alarms = nil, nil
		for _, al := range v.Alarms {
			s.Alarms = append(s.Alarms, fmt.Sprintf("%s on %x", al.Type, al.MemberID))
		}
		for _, m := range v.Members {
			s.Members = append(s.Members, MemberSummary{ID: fmt.Sprintf("%x", m.ID), Name: m.Name, Learner: m.IsLearner, Healthy: m.Healthy,
				DBSize: m.DBSize, DBSizeInUse: m.DBSizeInUse, Quota: m.Quota})
		}
	})
	sp, _ := a.Spec()
	pol, now := reconcile.DefragPolicyOf(sp.Maintenance.Defrag), time.Now()
	space := make([]metrics.MemberSpace, 0, len(v.Members))
	for _, m := range v.Members {
		space = append(space, metrics.MemberSpace{Name: m.Name, DBSize: m.DBSize, InUse: m.DBSizeInUse, Quota: m.Quota,
			NoSpace: model.Alarmed(v.Alarms, m.ID, model.AlarmNoSpace), DefragDue: reconcile.DefragDue(pol, m, now)})
	}
	a.metrics.Space.SetMembers(space)
}

// MemberSummary is one member in /status's cluster view.
type MemberSummary struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Learner bool   `json:"learner"`
	Healthy bool   `json:"healthy"`
	// DBSize, DBSizeInUse and Quota are its db file's size, what the keys
	// take of it, and its quota-backend-bytes (0: no status answer).
	DBSize      int64 `json:"dbSize,omitempty"`
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`
	Quota       int64 `json:"quota,omitempty"`
}

// statusLine is the one line systemd shows in `systemctl status`: what
// cannot be written first, it needs a human.
func (a *Agent) statusLine() string {
	st := a.Status()
	line := statusLineOf(st)
	if st.StateDirError != "" {
		line = truncate(fmt.Sprintf("%s: STATE DIR NOT WRITABLE (%s); %s", st.Member, st.StateDirError, strings.TrimPrefix(line, st.Member+": ")), 200)
	}
	return line
}

func statusLineOf(st Status) string {
	switch {
	case st.FenceStale:
		r := st.Recovery
		return truncate(fmt.Sprintf("%s: FENCE STALE: recovery %s from %s has not started in %s; my old member stays stopped: start the source, or run etcdkeeper recover --abort %s",
			st.Member, r.ID, r.Source, time.Since(r.StartedAt).Round(time.Second), r.ID), 200)
	case st.Recovery != nil && st.Recovery.Open():
		r := st.Recovery
		return truncate(fmt.Sprintf("%s: recovering (%s, recovery %s from %s): step %s; %s", st.Member, r.Role, r.ID, r.Source, r.Step, st.Decision), 200)
	case (model.Journal{Step: st.RejoinStep}).Open() && (st.Phase == model.PhaseRepairing || st.Phase == model.PhaseJoining || st.Phase == model.PhasePromoting):
		step := repair.Step(st.RejoinStep)
		return fmt.Sprintf("%s: %s: step %d/%d %s", st.Member, st.Phase, step.Number(), len(repair.Steps), st.RejoinStep)
	case st.Paused:
		// What a paused agent would do is the news, even on a healthy voter.
		return truncate(fmt.Sprintf("%s: %s", st.Member, st.Decision), 200)
	case st.Phase == model.PhaseRunning && st.Voters > 0:
		health := "healthy"
		if !st.Healthy {
			health = "unhealthy"
		}
		line := fmt.Sprintf("%s: %s, %s; leader %s; %d/%d healthy", st.Member, st.Role, health, st.LeaderName, st.HealthyVoters, st.Voters)
		if st.NoSpaceFull != "" {
			// It needs a human: before the alarms, which it explains.
			line += "; NOSPACE STAYS: " + st.NoSpaceFull
		}
		if len(st.Alarms) > 0 {
			line += "; alarm " + strings.Join(st.Alarms, ", ")
		}
		for _, d := range st.SlowDisks {
			line += fmt.Sprintf("; SLOW DISK %s (WAL fsync p99 %s)", d.Name, model.Latency(d.P99))
		}
		return truncate(line, 200)
	default:
		return truncate(fmt.Sprintf("%s: %s", st.Member, st.Decision), 200)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// StatusJSON is the value /status serves.
func (a *Agent) StatusJSON() any { return a.Status() }

// Live: the loop ran a pass recently (a wedged loop turns /healthz red).
func (a *Agent) Live() (bool, string) {
	s, _ := a.Spec()
	limit := 5*s.Agent.Interval.Duration + 30*time.Second
	st := a.Status()
	if st.LastPass.IsZero() {
		return true, "starting"
	}
	if age := time.Since(st.LastPass); age > limit {
		return false, fmt.Sprintf("reconcile loop stalled: last pass %s ago", age.Round(time.Second))
	}
	return true, "ok: last pass " + time.Since(st.LastPass).Round(time.Millisecond).String() + " ago"
}

// Ready: the local member is a healthy voter, and the agent can keep its
// state (marker, journals).
func (a *Agent) Ready() (bool, string) {
	st := a.Status()
	if st.StateDirError != "" {
		return false, "not ready: the state dir cannot be written: " + st.StateDirError
	}
	if st.Healthy {
		return true, "ok: healthy voter"
	}
	return false, "not ready: " + st.Decision
}

// Metrics is the agent's metrics registry.
func (a *Agent) Metrics() *metrics.Metrics { return a.metrics }
