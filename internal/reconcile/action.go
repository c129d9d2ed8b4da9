package reconcile

import "github.com/etcdkeeper/etcdkeeper/internal/model"

// ActionKind is the kind of the one step a pass takes.
type ActionKind int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=ActionKind -linecomment
const (
	DoNothing          ActionKind = iota // nothing
	DoWait                               // wait
	DoStart                              // start
	DoIdle                               // idle
	DoTakeLock                           // take-lock
	DoRejoin                             // rejoin
	DoPromote                            // promote
	DoFinishRejoin                       // finish-rejoin
	DoStopForRepair                      // stop-for-repair
	DoStopStuck                          // stop-stuck
	DoRestart                            // restart
	DoChangeMembership                   // change-membership
	DoDisarm                             // disarm
	DoRestartStalled                     // restart-stalled
	DoStopForRecovery                    // stop-for-recovery
	DoForceNewCluster                    // force-new-cluster
	DoRestoreSnapshot                    // restore-snapshot
	DoFinishRecovery                     // finish-recovery
	DoRefuseRecovery                     // refuse-recovery
	DoAcceptFence                        // accept-fence
	DoEndFence                           // end-fence
	DoDefrag                             // defrag
	DoRolloutSnapshot                    // rollout-snapshot
	DoDowngrade                          // downgrade
	DoFinishUpgrade                      // finish-upgrade
	DoCompact                            // compact
	DoTakeTurn                           // take-turn
	DoStopForTurn                        // stop-for-turn
	DoEndTurn                            // end-turn
	DoReleaseTurn                        // release-turn
	DoPlaceLeader                        // place-leader
	DoDefragOffline                      // defrag-offline
	DoResumeOffline                      // resume-defrag-offline
	DoEndOffline                         // end-defrag-offline
)

// Action is Decide's answer: one step, why, and a key that stays the same
// while the decision does (the agent logs a decision when its key changes,
// not when a duration in its reason ticks on).
type Action struct {
	Kind   ActionKind
	Reason string
	Key    string
	// Start is the start decision behind DoStart, DoIdle and DoRejoin.
	Start StartDecision
	// Step is the membership change behind DoChangeMembership (a leader
	// move also for maintenance), or the member DoDefrag defragments.
	Step Step
	// Alarms are the alarms DoDisarm clears.
	Alarms []model.Alarm
	// Recovered is the recovery DoAcceptFence takes part in.
	Recovered *model.Recovered
	// Restart is why DoRestart restarts (Restart.Agent: the agent too).
	Restart model.Restart
	// Downgrade is the call of etcd's downgrade API DoDowngrade makes.
	Downgrade Downgrade
	// Kill: DoStopStuck ends the process with SIGKILL at once (it is
	// stopped: SIGTERM would wait for a SIGCONT that never comes).
	Kill bool
	// Unlocked: a step that needs the cluster lock taken without it, by
	// the NOSPACE procedure's single actor (etcd refuses the lock's lease
	// under NOSPACE; see noSpace).
	Unlocked bool
	// Topic is what the decision is about, for the parts that report it
	// (STATUS's NOSPACE line, the rollout line): they read it, never the
	// Key or the Reason.
	Topic Topic
	// QuotaRaise: the step (a restart, or the leader's hand-off before
	// it) applies a quota-backend-bytes the spec raised under NOSPACE.
	QuotaRaise bool
	// Rollout is what the decision says of this member's rollout, typed
	// for the rollout line (RolloutText); nil: nothing.
	Rollout *model.RolloutNote
	// Turn is the host turn DoEndTurn ends (nil: the cluster no longer
	// holds it; the wish alone ends) or DoReleaseTurn releases.
	Turn *model.HostTurn
	// Placement is what DoPlaceLeader's leader move is for
	// (PlaceSlowDisk, PlaceAvoid, PlacePrefer).
	Placement string
	// Request is where this pass leaves the operator's request (nil:
	// none is pending); Decide fills it in for every decision while one
	// is.
	Request *model.RequestProgress
	// ReleaseLock: give the cluster lock back (if held) after this step.
	// The lock stays with a member that is starting, rejoining or
	// restarting until it is a healthy voter again.
	ReleaseLock bool
}

// Topic is what a decision is about: the typed half of the protocol
// between the decision and the parts that report it. Reasons are for
// people; nothing reads them to decide.
type Topic int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=Topic -trimprefix=Topic
const (
	TopicNone Topic = iota
	// TopicNoSpace: the NOSPACE procedure (compact, defragment, disarm,
	// the refusal while the data fills the quota, and a quota raise's
	// restarts under it).
	TopicNoSpace
	// TopicRollout: a rolling restart (settings, etcd binary, agent
	// binary) and its holds.
	TopicRollout
	// TopicMaintenance: online defragmentation outside NOSPACE.
	TopicMaintenance
	// TopicTurn: a host turn (etcdkeeper guard, maintenance start).
	TopicTurn
)

// NeedsLock: the steps that change the membership or take a member out
// of service, taken only while this agent holds the cluster lock (or, with
// Unlocked, by the NOSPACE procedure's single actor).
func (a Action) NeedsLock() bool {
	switch a.Kind {
	case DoRejoin, DoPromote, DoChangeMembership, DoRestart, DoDefrag, DoRolloutSnapshot, DoDowngrade, DoTakeTurn, DoPlaceLeader, DoDefragOffline:
		return true
	}
	return false
}
