package model

import "time"

// DataKind is what the local data dir holds, as far as the start decision
// cares.
type DataKind int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=DataKind -linecomment
const (
	DataEmpty      DataKind = iota // empty
	DataHealthy                    // healthy
	DataCorrupt                    // corrupt
	DataLocked                     // locked
	DataUnreadable                 // unreadable
)

// Data describes the local data dir:
//   - DataEmpty: no member in it (missing, empty, or only a fresh skeleton);
//   - DataHealthy: a member whose WAL and db verify;
//   - DataCorrupt: a member etcd cannot start from;
//   - DataLocked: another process holds the db lock;
//   - DataUnreadable: cannot be read (permissions, I/O): never treated as
//     empty or corrupt.
type Data struct {
	Kind      DataKind
	ClusterID uint64 // from the WAL metadata; 0 when unknown
	MemberID  uint64
	Reason    string // why corrupt, locked or unreadable
	// Members are the member IDs the data's membership lists (nil: not
	// read).
	Members []uint64
}

// Marker is what the agent recorded once its member was running: the proof
// that this host was part of the cluster.
type Marker struct {
	ClusterID uint64 `json:"clusterID"`
	MemberID  uint64 `json:"memberID"`
	// DataDev is the device (filesystem) the data dir was on while the
	// member ran: an empty data dir on another one may be an unmounted
	// disk.
	DataDev uint64 `json:"dataDev,omitempty"`
}

// AgentRecord is what each live agent publishes about itself in the
// cluster, bound to a lease: it disappears when the agent dies.
type AgentRecord struct {
	Name       string   `json:"name"`
	Generation string   `json:"generation"`
	Members    []string `json:"members"`
	Phase      string   `json:"phase"`
	Decision   string   `json:"decision"`
	Addr       string   `json:"addr,omitempty"`
	// MemberID is the agent's member (0 before it has one), and Progress
	// what it shows of its member catching up (data bytes arriving,
	// applied index): a learner that makes progress is not stale.
	MemberID uint64 `json:"memberID,omitempty"`
	Progress string `json:"progress,omitempty"`
	// Maintenance is what maintenance the agent runs now ("defragmenting
	// node2 since 02:00:01, deadline 1m0s"; "": none).
	Maintenance string `json:"maintenance,omitempty"`
	// Defragmenting is the member the agent defragments now (0: none).
	Defragmenting uint64 `json:"defragmenting,omitempty"`
	// DefragOffline: the agent defragments its own member offline when
	// the maintenance rule asks (stop etcd, rewrite its db, start it):
	// it is a version that can, and its last offline defragmentation did
	// not fail lately (reconcile's defragWay reads it).
	DefragOffline bool `json:"defragOffline,omitempty"`
	// RestartPending is why the agent's member is due for a rolling
	// restart ("etcd 3.6.16 → 3.7.3"; "": none): the leader restarts
	// last, once no other agent has one pending.
	RestartPending string `json:"restartPending,omitempty"`
	// RestartAgent: the pending restart is onto a new agent binary.
	RestartAgent bool `json:"restartAgent,omitempty"`
	// Version is the agent's version; EtcdVersion the version of the etcd
	// it runs ("" when not known).
	Version     string `json:"version,omitempty"`
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// RolloutSnapshot is the rollout (reconcile.RolloutKey) for which the
	// agent took the verified snapshot a rollout begins with: the other
	// members of the rollout need not take another.
	RolloutSnapshot string `json:"rolloutSnapshot,omitempty"`
	// Rollout is what its last decision said of a rollout (nil: nothing).
	Rollout *RolloutNote `json:"rollout,omitempty"`
	// Request is where the operator's request stands in this agent's
	// last pass (nil: none).
	Request *RequestProgress `json:"request,omitempty"`
	// Paused: an operator's pause held this agent's last pass; PausedLocal,
	// one kept on its own host (taken without quorum).
	Paused      bool `json:"paused,omitempty"`
	PausedLocal bool `json:"pausedLocal,omitempty"`
	// Certs is where the certificates of the agent's host stand (see
	// agent.startRenewal).
	Certs []CertStatus `json:"certs,omitempty"`
	// CA is what the host says of its CAs during a CA rotation (nil:
	// none).
	CA *CATrust `json:"ca,omitempty"`
	// Rotation is the host's step of a CA rotation (nil: none).
	Rotation *RotationNote `json:"rotation,omitempty"`
	// WantsTurn is why the agent's host waits for a host turn ("": it
	// does not): the leader's host takes its turn last.
	WantsTurn string `json:"wantsTurn,omitempty"`
	// RestoreDrill is the agent's last restore drill, in a line ("": none
	// yet), and its snapshots' encryption (Backup), for status.
	RestoreDrill string `json:"restoreDrill,omitempty"`
	Backup       string `json:"backup,omitempty"`
	// Disk is what the agent measured of its member's disk (nil: nothing
	// yet, or etcd's metrics cannot be read).
	Disk *DiskLatency `json:"disk,omitempty"`
}

// Phase is what the agent is doing with its member, for STATUS, /status
// and the agent record.
type Phase string

const (
	PhaseStarting   Phase = "starting"   // etcd started, not serving yet
	PhaseRunning    Phase = "running"    // a healthy voter
	PhaseWaiting    Phase = "waiting"    // blocked; the decision says on what
	PhaseIdle       Phase = "idle"       // not in the spec: stays stopped
	PhaseJoining    Phase = "joining"    // rejoining with an empty data dir
	PhaseRepairing  Phase = "repairing"  // rejoining in place of unusable data
	PhasePromoting  Phase = "promoting"  // a learner, until promoted
	PhaseRecovering Phase = "recovering" // taking part in a recovery from quorum loss
)

// DefragMark is what a defragmentation measured of a member: the data in
// use and the file's size just after (a defragmented db file is its data
// and a few free pages), and when.
type DefragMark struct {
	InUse int64
	// Size is its db file just after: a file grown past it since (new
	// writes, a NOSPACE after a recovery) makes the mark stale.
	Size int64
	At   time.Time
	// Below: when it was measured, some member's own figure put the data
	// below the NOSPACE line already (reconcile.DataBelow): that figure
	// is no news then.
	Below bool
}

// Local is the local member as one pass observed it.
type Local struct {
	// Running: the etcd process is running.
	Running bool
	// Turn is this host's wish for a host turn (etcdkeeper guard,
	// maintenance start) and where its work stands.
	Turn TurnLocal
	// Answer is what the local etcd's client port answered; nil when it
	// did not (starting, stuck, or stopped).
	Answer *Answer
	// SilentFor is how long the running etcd has not answered.
	SilentFor time.Duration
	// LeaderlessFor is how long the running etcd has not answered with a
	// leader (silent, or answering without one), since it last did or,
	// if it never did, since it started; 0 while it has one.
	LeaderlessFor time.Duration
	// HandshakeRefused is why the TLS handshake with the silent local
	// etcd failed (etcd refused the agent's certificate, or the agent
	// etcd's); "" when it did not. An etcd that refuses a handshake runs
	// and serves its port: it is misconfigured, not stuck.
	HandshakeRefused string
	// StoppedFor is how long the silent etcd's process has been seen
	// stopped (state T or t: SIGSTOP, a tracer); 0 when it is not.
	StoppedFor time.Duration
	// DiskSleep: the silent etcd's process was seen waiting on the disk
	// (state D) at the last look: no signal acts on it before the I/O
	// returns, so stopping it would only block the agent.
	DiskSleep bool
	// DefragmentedBy names the agent whose record says it is
	// defragmenting the silent local member (etcd answers nothing while
	// it rewrites its db); "" when none does (read only once the etcd has
	// been silent long enough to be stopped).
	DefragmentedBy string
	// StillFor is how long neither the silent etcd's CPU time nor its
	// data dir (WAL, snap) moved; 0 while they do and while it waits on
	// the disk (state D).
	StillFor time.Duration
	// RestartIn is the restart backoff left after an exit (0: start now).
	RestartIn time.Duration
	// LastExit is etcd's last exit, classified; nil after a clean run.
	LastExit *Exit
	// Data is the data dir, inspected only when etcd is about to start.
	Data Data
	// Marker is nil when this host never ran a member of the cluster.
	Marker  *Marker
	Journal Journal
	// RepairBlocked is non-empty when moving data is not allowed now
	// (repair disabled, rate limited, unreadable journal): the reason.
	RepairBlocked string
	// DataUnmounted is non-empty when the data dir looks like a mount
	// point without its filesystem: the evidence.
	DataUnmounted string
	// AddBlocked is non-empty when this host may not be added to the
	// cluster again now (the rate limit counts every add): the reason.
	AddBlocked string
	// LockHeld: this agent holds the cluster lock, and its lease is alive.
	LockHeld bool
	// LockHeldElsewhere: another agent holds the cluster lock (read only
	// under NOSPACE, where the unlocked single actor must not act beside
	// a holder that took it before the alarm).
	LockHeldElsewhere bool
	// Restart is why the running etcd must restart (changed settings,
	// another etcd binary, another agent binary); zero when none is due.
	Restart Restart
	// WantEtcd is the version of the etcd the spec names now (its
	// etcd.binary's, or the built-in one's); "" when not known.
	WantEtcd string
	// LostPublishRace: the running etcd applied a snapshot from the leader
	// and has not published itself since: etcd's publish stall, 7 s before
	// it serves (docs/etcd-publish-stall.md). Set only while
	// agent.restartPublishStall is on.
	LostPublishRace bool
	// ListedAsLearner: the cluster's member list shows the rejoin's new
	// member as a learner (asked only when LostPublishRace).
	ListedAsLearner bool
	// Recovery is this host's part in a recovery from quorum loss (zero:
	// none).
	Recovery Recovery
	// StateDirError is non-empty while a file of the state dir cannot be
	// written (full, read-only, immutable): the error.
	StateDirError string
	// Binary is the agent's own executable: the build it runs and, after
	// a package upgrade replaced the file, the one installed now.
	Binary Binary
	// Upgraded is the journal of this agent's restart onto a new binary
	// (upgrade.json), as far as decisions care: nil when none is open.
	Upgraded *Upgraded
	// OfflineDefrag is the journal of this agent's offline
	// defragmentation of its member (defrag.json), as far as decisions
	// care: nil when none is open.
	OfflineDefrag *OfflineDefrag
}

// OfflineDefrag is an open offline defragmentation of the local member:
// journaled before etcd stops, closed once the member is a caught-up
// voter again.
type OfflineDefrag struct {
	MemberID uint64
	Step     OfflineStep
	// Request is the operator's request it serves ("": the agents' own
	// maintenance).
	Request string
}

// OfflineStep is where an offline defragmentation stands, by what is
// done: each is journaled before the next begins.
type OfflineStep string

const (
	// OfflineStopping: etcd is being stopped (it may still run).
	OfflineStopping OfflineStep = "stopping"
	// OfflineStopped: etcd is stopped; its db is being rewritten.
	OfflineStopped OfflineStep = "stopped"
	// OfflineRewritten: the rewrite is over (done, or failed and the old
	// db kept whole); etcd starts as it is and catches up.
	OfflineRewritten OfflineStep = "rewritten"
)

// Upgraded is an open restart of the agent onto a new binary: the old
// process journaled it before it stopped etcd and exec'd the new one; the
// new process closes it once its member is a caught-up healthy voter.
type Upgraded struct {
	From, To Build
	// Lock: the new process holds the cluster lock the old one took (the
	// same lease, resumed); false when the lease ran out in between.
	Lock bool
}

// The roles of a recovery (recovery.Role).
const (
	RecoverySource = "source"
	RecoveryFenced = "fenced"
)

// Recovery is this host's part in a recovery from quorum loss, as far as
// decisions care (package recovery keeps the whole journal).
type Recovery struct {
	ID   string
	Role string // RecoverySource or RecoveryFenced
	Step string // "" when there is none; "done" or "refused" when over
	// Source is the member the cluster is recovered from.
	Source string
	// OldMemberID is this host's member when the recovery began: a fenced
	// host never starts it again.
	OldMemberID uint64
	// OldClusterID is the cluster that lost its quorum (0: unknown).
	OldClusterID uint64
	// FromSnapshot: the source restores a snapshot instead of its data.
	FromSnapshot bool
	// ForcedFrom are the members the source's data listed when its
	// forced start was journaled (nil: not known): data that lists others
	// shows the forced start took.
	ForcedFrom []uint64
}

// Open: the recovery is under way on this host (neither done, refused
// nor aborted: recovery.Journal.Open is this).
func (r Recovery) Open() bool {
	return r.Step != "" && r.Step != "done" && r.Step != "refused" && r.Step != "aborted"
}

// Fenced: this host's old member must stay stopped until it rejoins the
// recovered cluster.
func (r Recovery) Fenced() bool { return r.Open() && r.Role == RecoveryFenced }

// Answer is the local etcd's status answer.
type Answer struct {
	MemberID  uint64
	ClusterID uint64
	Leader    uint64
	IsLearner bool
	Applied   uint64 // raft applied index
	Revision  int64  // the store's current revision (its header)
	Alarms    []Alarm
}

// ServingVoter: the local member answered as a voter that knows a
// leader (nil: it did not answer). The one spelling of "a healthy local
// voter" from the local answer; model.Healthy is the cluster's rule, which
// also leaves out a member a CORRUPT alarm names.
func (a *Answer) ServingVoter() bool { return a != nil && a.Leader != 0 && !a.IsLearner }

// The alarm types etcd raises (etcdserverpb.AlarmType's names).
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Alarm is one active alarm of the cluster: its type (NOSPACE, CORRUPT)
// and the member it names.
type Alarm struct {
	MemberID uint64
	Type     string
}

// Exit is how etcd last ended: the exit as text, its failure class and
// why it was classified so.
type Exit struct {
	Text    string
	Class   string
	Reason  string
	Corrupt bool
}

// Journal is the open rejoin journal's state, as far as decisions care.
type Journal struct {
	Step  string // "" when there is none, "done" when closed
	Class string // "join" or "repair"
}

// Open: a rejoin is under way (started and not done).
func (j Journal) Open() bool { return j.Step != "" && j.Step != "done" }
