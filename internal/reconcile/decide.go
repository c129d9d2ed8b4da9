package reconcile

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// ReadyDeadline is how long a running etcd may stay silent (its client
// port serves only once it has published itself through raft) while its
// peers are healthy, before the agent stops it and checks its data.
const ReadyDeadline = 90 * time.Second

// NoLeaderLook is how long a running member may answer without a leader
// before the agent looks at the cluster through the spec's other members:
// a cluster recovered while this host was away answers there, and its
// record says whether this member is one it replaced (lateFence).
const NoLeaderLook = 30 * time.Second

// classRemoved is repair.ClassRemoved's name: etcd said the member was
// removed from the cluster (or has another cluster's identity).
const classRemoved = "removed"

// StoppedGrace is how long the silent local etcd's process may be seen
// stopped (state T: SIGSTOP, a tracer) before it is killed: a stop of a
// moment (kill -STOP, a look, kill -CONT) passes. A stopped process
// answers nobody and cannot act on SIGTERM; waiting out ReadyDeadline
// for it only keeps the cluster a vote short.
const StoppedGrace = 5 * time.Second

// StillDeadline is how long a silent local etcd may use no CPU time and
// write nothing to its data dir before it is stopped. One that starts or
// catches up works: raft ticks every heartbeat, data arrives. One that
// does neither is frozen (a cgroup freezer, a lost wakeup). A process
// waiting on the disk (state D) is never still.
const StillDeadline = 20 * time.Second

// Input is everything one pass observed: the spec in force, the local
// member, the live cluster and the other agents. Decide reads nothing else.
type Input struct {
	Self spec.Member
	// InSpec: the spec in force lists Self (a host dropped from the spec
	// keeps its last entry as Self, to know where its data lives).
	InSpec     bool
	Desired    []spec.Member
	Generation string
	// LearnerTimeout is agent.learnerTimeout.
	LearnerTimeout time.Duration

	Local model.Local
	// Cluster is the live cluster seen through the peers; nil when none
	// answered with a leader (or it was not asked this pass).
	Cluster *model.Cluster
	// PeerAnswered, when Cluster is nil and the data dir is empty, is the
	// evidence that some peer is alive anyway (see StartInput).
	PeerAnswered string
	// Agents are the live agents' records (nil when not read).
	Agents []model.AgentRecord
	// Defrag is the maintenance.defrag policy.
	Defrag DefragPolicy
	// NoSpace is the maintenance.nospace policy, with the spec's quotas.
	NoSpace NoSpacePolicy
	// MaxDisrupted is maintenance.maxDisrupted (0: 1).
	MaxDisrupted int
	// TurnTimeout is maintenance.hostTurnTimeout: a host turn its
	// holder's agent has not renewed for this long is released.
	TurnTimeout time.Duration
	// Pause is the operator's pause (nil: none), as of Now.
	Pause *model.Pause
	// Request is the operator's request (etcdkeeper defrag --yes, leader
	// move) the loop carries out (nil: none).
	Request *model.Request
	// Memory is what this agent remembers of its own past steps: the
	// second input beside the observation.
	Memory model.Memory
	Now    time.Time

	// view is Cluster's model.View, derived once by Decide.
	view *model.View
}

// View is the pass's model.View of Cluster (the zero View without one):
// derived once by Decide, and only derived here for the callers that
// enter a rule without it.
func (in Input) View() model.View {
	switch {
	case in.view != nil:
		return *in.view
	case in.Cluster == nil:
		return model.View{}
	}
	return model.NewView(*in.Cluster, in.Agents)
}

// Decide is the agent's one decision per pass. Guard clauses in order;
// each returns one action with its reason.
func Decide(in Input) Action {
	if in.Cluster != nil {
		v := model.NewView(*in.Cluster, in.Agents)
		in.view = &v
	}
	act := decide(in)
	if in.Pause.InForce(in.Now) {
		act = Paused(*in.Pause, in.Now, act)
	}
	return withRequest(in, act)
}

func decide(in Input) Action {
	if in.Local.Recovery.Open() {
		if act, ok := decideRecovery(in); ok {
			return act
		}
	}
	if in.Local.Running {
		return decideRunning(in)
	}
	return decideStopped(in)
}

// decideStopped handles a local etcd that is not running: wait out the
// restart backoff, then start it as DecideStart says.
func decideStopped(in Input) Action {
	l := in.Local
	if act, ok := ownTurn(in); ok {
		return act
	}
	if act, ok := resumeOfflineDefrag(in); ok {
		return act
	}
	if l.RestartIn > 0 {
		return wait("backoff", "restart backoff after %s (%s)", l.LastExit.Text, l.LastExit.Class)
	}
	if act, ok := lateFence(in); ok {
		return act
	}
	if e := l.LastExit; e != nil && e.Class == classRemoved && in.Cluster == nil {
		// Started again, it would only be told so again (and its data
		// checked each time): wait until a cluster answers to rejoin.
		return giveBack(wait("removed-no-cluster", "etcd said my member was removed from the cluster (%s); no cluster answers with a leader to rejoin: not starting it again until one does", e.Reason))
	}
	d := DecideStart(startInput(in))
	key := "start/" + d.Action.String() + "/" + stableKey(d.Reason)
	if why := startRefused(in, d); why != "" {
		return giveBack(wait("start-refused/"+stableKey(why), "%s", why))
	}
	switch d.Action {
	case ActWait:
		return Action{Kind: DoWait, Reason: "waiting: " + d.Reason, Key: key, Start: d, ReleaseLock: true}
	case ActIdle:
		return Action{Kind: DoIdle, Reason: "idle: " + d.Reason, Key: key, Start: d, ReleaseLock: true}
	case ActStartNew:
		if l.StateDirError != "" {
			// The marker is the proof that this host became a member: a
			// host that forms the cluster and cannot keep it would later
			// take itself for a new one.
			return giveBack(wait("new-state-dir", "not forming a new cluster while the state dir cannot be written (%s): %s", l.StateDirError, d.Reason))
		}
		return Action{Kind: DoStart, Reason: "started etcd: " + d.Reason, Key: key, Start: d}
	case ActStartAsIs:
		return Action{Kind: DoStart, Reason: "started etcd: " + d.Reason, Key: key, Start: d}
	}
	// etcd refuses lease grants and transactions — and so the cluster lock
	// — while a CORRUPT alarm is raised. The alarm names the member whose
	// data this rejoin moves aside: its work is done, clear it first.
	if a, ok := corruptAlarmOn(in.Cluster, d.StaleID, l.Data.MemberID); ok && d.Repair {
		return disarm([]model.Alarm{a}, fmt.Sprintf("disarm the CORRUPT alarm of my member %x: its data is about to be moved aside (%s)", a.MemberID, d.Reason))
	}
	// The one rejoin path changes membership: only under the cluster lock,
	// and decided again by the pass that holds it.
	if !l.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to rejoin: " + d.Reason, Key: "lock/rejoin", Start: d}
	}
	return Action{Kind: DoRejoin, Reason: "rejoining: " + d.Reason, Key: key, Start: d}
}

// corruptAlarmOn finds a CORRUPT alarm naming one of ids.
func corruptAlarmOn(c *model.Cluster, ids ...uint64) (model.Alarm, bool) {
	if c == nil {
		return model.Alarm{}, false
	}
	for _, a := range c.Alarms {
		if a.Type == model.AlarmCorrupt && a.MemberID != 0 && slices.Contains(ids, a.MemberID) {
			return a, true
		}
	}
	return model.Alarm{}, false
}

// startInput is DecideStart's view of the pass.
func startInput(in Input) StartInput {
	l := in.Local
	si := StartInput{Self: in.Self, InSpec: in.InSpec, SpecSize: len(in.Desired), Data: l.Data, Marker: l.Marker,
		Cluster: in.Cluster, PeerAnswered: in.PeerAnswered, RepairBlocked: l.RepairBlocked, AddBlocked: l.AddBlocked, DataUnmounted: l.DataUnmounted,
		Fence: l.Recovery}
	if l.LastExit != nil && l.LastExit.Corrupt {
		si.ExitCorrupt, si.ExitReason = true, l.LastExit.Reason
	}
	return si
}

// decideRunning handles a running local etcd: make sure it serves, promote
// it while it is a learner, finish an open rejoin, restart it in its turn
// when a restart is due (rollingRestart), and converge the membership to
// the spec.
func decideRunning(in Input) Action {
	l := in.Local
	a := l.Answer
	if a == nil {
		return notAnswering(in)
	}
	if model.Alarmed(a.Alarms, a.MemberID, model.AlarmCorrupt) {
		return stopForRepair(in)
	}
	if a.Leader == 0 {
		// A cluster of another ID answers at the spec's other members,
		// and its recovery record names mine: it was recovered while this
		// host was away (the same ID, after --force-new-cluster, makes
		// etcd itself exit this member as removed).
		if c := in.Cluster; c != nil && c.ClusterID != a.ClusterID && l.LeaderlessFor >= NoLeaderLook {
			if act, ok := lateFence(in); ok {
				return act
			}
		}
		return wait("no-leader", "local member has no leader")
	}
	if a.IsLearner {
		return promote(in)
	}
	if act, ok := ownTurn(in); ok {
		return act
	}
	if act, ok := offlineReturning(in); ok {
		return act
	}
	if l.Journal.Open() {
		return Action{Kind: DoFinishRejoin, Reason: fmt.Sprintf("rejoin finished: %s is a healthy voter", in.Self.Name), Key: "finish-rejoin", ReleaseLock: true}
	}
	if act, ok := finishUpgrade(in); ok {
		return act
	}
	if act, ok := restartedCatchingUp(in); ok {
		return act
	}
	if act, ok := downgradeCancel(in); ok {
		return act
	}
	if l.Restart.Due() {
		if in.Cluster != nil && in.View().NoSpace {
			return restartUnderNoSpace(in)
		}
		return rollingRestart(in)
	}
	return converge(in)
}

// restartUnderNoSpace: no lock can be taken under NOSPACE (etcd refuses
// lease grants). A raised quota, which is what cures a cluster whose data
// fills it, restarts in the order quotaRaiseTurn reads from the
// observation, granted by the budget like every other restart; every
// other restart waits for the alarm to clear (the NOSPACE rule in
// converge says what the cluster waits for, and gives back a lock taken
// before the alarm: G3). A holder of such a lock restarts for the raise
// under it, and the unlocked others wait for it (grant's rule 1).
func restartUnderNoSpace(in Input) Action {
	l := in.Local
	turn, why := quotaRaiseTurn(in)
	if turn == nil {
		return converge(in)
	}
	if r := l.Restart; r.Agent || r.EtcdTo != "" {
		// The restart would also move this member to another binary: an
		// upgrade, which goes only under the lock, after etcd's preflight
		// and the rollout's snapshot (rollingRestart), never unlocked
		// beside the procedure.
		return Action{Kind: DoWait, Key: "nospace-wait/restart-binary", ReleaseLock: true, Topic: TopicNoSpace,
			Reason: fmt.Sprintf("NOSPACE: %s; but this restart also moves to another binary (%s), which waits until the alarm is cleared: put the binary back to restart with the raised quota alone", why, r.Why)}
	}
	if l.LockHeld {
		return rollingRestart(in)
	}
	g := budgetOf(in).grant(Request{Member: l.Answer.MemberID, Kind: DisruptRestart, Why: why}, *turn, true)
	switch {
	case !g.Granted():
		return converge(in)
	case g.HandOff != nil:
		// MoveLeader is not refused under NOSPACE: a restart in place
		// would cost an election.
		step := *g.HandOff
		return Action{Kind: DoChangeMembership, Unlocked: true, Key: fmt.Sprintf("restart/nospace-move-leader/%x", step.To), Step: step, Topic: TopicNoSpace, QuotaRaise: true,
			Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}
	}
	return Action{Kind: DoRestart, Unlocked: true, Restart: l.Restart, Key: "restart/nospace", Topic: TopicNoSpace, QuotaRaise: true, Reason: "restarting etcd: " + why}
}

// stopForRepair stops a member that etcd found corrupt, so that the start
// path repairs it — but only when the other voters form a healthy quorum
// without it, the same test a repair passes: a corrupt member that still
// votes is better than no quorum (reads are served; etcd refuses writes
// while the alarm is raised anyway).
func stopForRepair(in Input) Action {
	id := in.Local.Answer.MemberID
	why := fmt.Sprintf("etcd raised a CORRUPT alarm on member %x", id)
	if in.Cluster == nil {
		return giveBack(wait("corrupt-no-view", "%s; cannot observe the cluster to stop it safely", why))
	}
	// The budget's repair stop: caught up, not only answering, the others
	// must be raft's quorum of every voter, this one included (it stays a
	// member until the repair removes it, so a quorum of the others alone
	// is one short for an even count, 2 of 4).
	if g := budgetOf(in).grant(Request{Member: id, Kind: DisruptRepairStop, Why: why}, Queue{}, false); !g.Granted() {
		return giveBack(wait("corrupt-no-quorum", "%s; not stopping it while %s", why, g.Wait))
	}
	return Action{Kind: DoStopForRepair, Reason: why, Key: "stop-for-repair"}
}

// promote promotes the local learner under the cluster lock: the lock
// holder that removes stale learners then never removes one that was
// promoted a moment before. A learner that gave the lock back (it held
// it past the learner timeout without catching up) leaves it to the
// others for half a timeout before it asks again.
func promote(in Input) Action {
	id := in.Local.Answer.MemberID
	if in.Local.LockHeld {
		return Action{Kind: DoPromote, Reason: fmt.Sprintf("promoting learner %x", id), Key: "promote"}
	}
	if r := in.Memory.LockReturned; r > 0 && r < in.LearnerTimeout/2 {
		return wait("learner-gave-lock-back", "learner %x gave the cluster lock back after agent.learnerTimeout; asking again in %s",
			id, (in.LearnerTimeout/2 - r).Round(time.Second))
	}
	return Action{Kind: DoTakeLock, Reason: fmt.Sprintf("taking the cluster lock to promote learner %x", id), Key: "lock/promote"}
}

// notAnswering: waiting for a starting etcd is normal; but an etcd that
// stays silent although the others form a healthy quorum is stuck (e.g.
// it cut a damaged WAL and now lacks committed entries): stop it, so that
// the start path inspects the data dir and decides again. A process that
// is stopped, or that neither works nor writes, is stuck sooner.
func notAnswering(in Input) Action {
	l := in.Local
	if l.LostPublishRace {
		return publishStalled(in)
	}
	if l.HandshakeRefused != "" {
		return wait("tls-refused", "local etcd does not answer the agent: the TLS handshake fails: %s; fix the certificates (etcdkeeper validate checks them)", l.HandshakeRefused)
	}
	if !SilentTooLong(l) {
		return wait("not-answering", "local etcd is not answering yet")
	}
	if l.DefragmentedBy != "" && l.StoppedFor < StoppedGrace {
		// Defragmenting, etcd answers nothing until it is done; the call
		// has its deadline (at most 10 min).
		return wait("defragmenting", "local etcd answers nothing while agent %s defragments it: not stopping it", l.DefragmentedBy)
	}
	if l.DiskSleep {
		return wait("not-answering-disk", "local etcd is not answering and waits on its disk (process state D): not stopping it, no signal acts before the I/O returns")
	}
	if in.Cluster == nil || !othersHaveQuorum(in) {
		return wait("not-answering-no-quorum", "local etcd is not answering and the peers have no healthy quorum without it")
	}
	return stopStuck(l)
}

// SilentTooLong: the silent local etcd may be stuck, if the others keep
// a quorum without it (the agent then observes the cluster to know).
func SilentTooLong(l model.Local) bool {
	return l.SilentFor >= ReadyDeadline || l.StoppedFor >= StoppedGrace || l.StillFor >= StillDeadline
}

// stopStuck stops a stuck etcd: a stopped process by SIGKILL at once.
func stopStuck(l model.Local) Action {
	switch {
	case l.StoppedFor >= StoppedGrace:
		return Action{Kind: DoStopStuck, Kill: true, Key: "stop-stuck/stopped",
			Reason: fmt.Sprintf("stopped process (state T: SIGSTOP) for %s, not answering, while its peers have a quorum without it", l.StoppedFor.Round(time.Second))}
	case l.StillFor >= StillDeadline:
		return Action{Kind: DoStopStuck, Key: "stop-stuck/still",
			Reason: fmt.Sprintf("stopped etcd: not answering for %s, and neither its CPU time nor its data dir moved for %s, while its peers are healthy",
				l.SilentFor.Round(time.Second), l.StillFor.Round(time.Second))}
	}
	return Action{Kind: DoStopStuck, Key: "stop-stuck",
		Reason: fmt.Sprintf("stopped etcd: not answering for %s while its peers are healthy", l.SilentFor.Round(time.Second))}
}

// publishStalled restarts a joining member's etcd that lost etcd's
// publish race (docs/etcd-publish-stall.md): restarted, it serves within
// a second instead of in 7. Only a learner of an open rejoin, which
// serves nobody yet and votes on nothing: never a voter, whose restart
// costs the cluster a vote.
func publishStalled(in Input) Action {
	l := in.Local
	if !l.Journal.Open() || !l.ListedAsLearner {
		return wait("publish-stall", "local etcd is stalled in its publish (etcd's 7 s publish timeout); not restarting a member that is not a joining learner")
	}
	return Action{Kind: DoRestartStalled, Key: "restart-stalled",
		Reason: "restarting etcd: it applied a snapshot that already holds its own publish and would wait out etcd's 7 s publish timeout"}
}

// othersHaveQuorum: the voters other than the local member form a healthy
// quorum of the voters without it.
func othersHaveQuorum(in Input) bool {
	var self uint64
	for _, m := range in.Cluster.Members {
		if m.Name == in.Self.Name {
			self = m.ID
		}
	}
	ok, _ := in.View().ServesWithout(self)
	return ok
}

// converge makes at most one membership change toward the spec, under the
// cluster lock.
func converge(in Input) Action {
	self := fmt.Sprintf("no action: %s is a healthy voter (member %x, leader %x)", in.Self.Name, in.Local.Answer.MemberID, in.Local.Answer.Leader)
	if in.Cluster == nil {
		return Action{Kind: DoNothing, Reason: self, Key: "healthy-voter", ReleaseLock: true}
	}
	if len(in.Cluster.Foreign) > 0 {
		return giveBack(wait("foreign", "the cluster's endpoints disagree on its ID (%s): no membership change", strings.Join(in.Cluster.Foreign, "; ")))
	}
	if model.Alarmed(in.Cluster.Alarms, 0, model.AlarmCorrupt) {
		// etcd's hash check found a mismatch but no majority to tell who
		// diverged: the whole cluster is suspect. Disarming it would let
		// writes go on over diverged data.
		return giveBack(wait("corrupt-cluster", "etcd raised a CORRUPT alarm for the whole cluster (member 0: no majority agreed on a hash), so the whole cluster is suspect: no change; compare the members' data (etcdctl endpoint hashkv) and disarm it by hand"))
	}
	if act, ok := releaseTurn(in); ok {
		return act
	}
	if gone := alarmsOfGone(*in.Cluster); len(gone) > 0 {
		return disarm(gone, fmt.Sprintf("disarm %s alarm of member %x, which is no longer in the cluster", gone[0].Type, gone[0].MemberID))
	}
	if act, ok := noSpace(in); ok {
		// Before Plan: under NOSPACE no membership change can take the
		// cluster lock anyway.
		return act
	}
	step := Plan(in.Desired, *in.Cluster, Options{LearnerTimeout: in.LearnerTimeout})
	switch step.Kind {
	case StepNone:
		// An operator's request, then maintenance, only once the
		// membership is as the spec wants it.
		if act, ok := request(in, self); ok {
			return act
		}
		if act, ok := wantTurn(in, self); ok {
			return act
		}
		return maintain(in, self)
	case StepWait:
		// Plan's waits say "waiting: ..." themselves.
		return Action{Kind: DoWait, Reason: step.Reason, Key: "plan/" + stableKey(step.Reason), ReleaseLock: true}
	}
	if why := specDisagrees(in, step); why != "" {
		return Action{Kind: DoWait, Reason: "waiting: " + why, Key: "spec-skew/" + step.Name, ReleaseLock: true}
	}
	key := fmt.Sprintf("change/%s/%x", step.Kind, step.MemberID)
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step}
	}
	return Action{Kind: DoChangeMembership, Key: key, Step: step, ReleaseLock: true,
		Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}
}

// maintain takes the maintenance step PlanMaintenance decides, under the
// cluster lock. A maintenance that waits (outside its window, a member
// catching up) is no action for this agent: the loop stays steady, and
// the reason says what waits.
func maintain(in Input, self string) Action {
	step := planMaintenance(budgetOf(in), in.Defrag)
	if step.Kind == StepNone || step.Kind == StepWait {
		// The leader placement when no defragmentation is to be done now
		// (one that is due goes first: its hand-off would undo the move).
		if act, ok := placeLeader(in, self); ok {
			return act
		}
	}
	switch step.Kind {
	case StepNone:
		return Action{Kind: DoNothing, Reason: self, Key: "healthy-voter", ReleaseLock: true}
	case StepWait:
		return Action{Kind: DoNothing, Reason: self + "; " + step.Reason, Key: "maintenance-wait/" + numberless(step.Reason), ReleaseLock: true}
	}
	key := fmt.Sprintf("maintenance/%s/%x", step.Kind, step.MemberID)
	if offlineElsewhere(in, step) {
		return Action{Kind: DoNothing, Reason: self + "; " + step.Reason + ": its own agent's step", Key: "maintenance-elsewhere/" + key, ReleaseLock: true}
	}
	if step.Kind == StepDefragOffline {
		return defragOfflineStep(in, step, key)
	}
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step}
	}
	if step.Kind == StepMoveLeader {
		return Action{Kind: DoChangeMembership, Key: key, Step: step, ReleaseLock: true,
			Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}
	}
	return Action{Kind: DoDefrag, Key: key, Step: step, ReleaseLock: true, Reason: step.Reason}
}

// placeLeader takes planPlacement's leader move under the cluster lock.
// A move that waits is no action for this agent (the loop stays steady),
// and neither holds a defragmentation back.
func placeLeader(in Input, self string) (Action, bool) {
	step, what := planPlacement(budgetOf(in))
	switch step.Kind {
	case StepNone:
		return Action{}, false
	case StepWait:
		if planMaintenance(budgetOf(in), in.Defrag).Kind != StepNone {
			return Action{}, false // the maintenance's wait says more
		}
		return Action{Kind: DoNothing, Reason: self + "; " + step.Reason, Key: "placement-wait/" + what + "/" + numberless(step.Reason), ReleaseLock: true}, true
	}
	key := fmt.Sprintf("placement/%s/%x", what, step.MemberID)
	if !in.Local.LockHeld {
		return Action{Kind: DoTakeLock, Reason: "taking the cluster lock to " + step.Reason, Key: "lock/" + key, Step: step, Placement: what}, true
	}
	return Action{Kind: DoPlaceLeader, Key: key, Step: step, Placement: what, ReleaseLock: true,
		Reason: fmt.Sprintf("changed membership: %s %s (%s)", step.Kind, step.Name, step.Reason)}, true
}

// numbers are what a maintenance wait's reason carries that changes from
// pass to pass (how far behind, how many bytes).
var numbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

func numberless(reason string) string { return numbers.ReplaceAllString(reason, "#") }

// alarmsOfGone are the alarms that name a member the cluster no longer
// lists (a repaired member's old ID): nothing can clear them but a disarm,
// and a CORRUPT one keeps the whole cluster from taking writes.
func alarmsOfGone(c model.Cluster) []model.Alarm {
	var out []model.Alarm
	for _, a := range c.Alarms {
		// Member 0 is etcd's "the whole cluster", never a member gone.
		if a.MemberID != 0 && !c.Listed(a.MemberID) {
			out = append(out, a)
		}
	}
	return out
}

func disarm(alarms []model.Alarm, reason string) Action {
	return Action{Kind: DoDisarm, Reason: reason, Key: fmt.Sprintf("disarm/%s/%x", alarms[0].Type, alarms[0].MemberID), Alarms: alarms, ReleaseLock: true}
}

// specDisagrees holds back the removal of a member while a live agent
// runs a spec that still lists it: the spec file reaches hosts at
// different times, and removing a member some host still wants would make
// the two fight.
func specDisagrees(in Input, step Step) string {
	if step.Kind == StepUpdatePeerURLs {
		return specsDiffer(in, step)
	}
	if step.Kind != StepRemove || step.Name == "" {
		return ""
	}
	for _, m := range in.Desired {
		if m.Name == step.Name {
			return "" // a stale learner of a spec member: every spec agrees it may go
		}
	}
	if in.Agents == nil {
		return "cannot read the agents' specs"
	}
	for _, r := range in.Agents {
		if r.Generation != in.Generation && slices.Contains(r.Members, step.Name) {
			return fmt.Sprintf("not removing %s yet: agent %s runs spec generation %s, which still lists it (mine is %s)", step.Name, r.Name, r.Generation, in.Generation)
		}
	}
	return ""
}

// specsDiffer holds back a peer URL update while any live agent runs
// another spec generation: two specs that disagree on a member's URLs
// would have their agents flip them back and forth.
func specsDiffer(in Input, step Step) string {
	if in.Agents == nil {
		return "cannot read the agents' specs"
	}
	for _, r := range in.Agents {
		if r.Generation != in.Generation {
			return fmt.Sprintf("not updating the peer URLs of %s yet: agent %s runs spec generation %s (mine is %s)", step.Name, r.Name, r.Generation, in.Generation)
		}
	}
	return ""
}

// giveBack marks a wait of a voter that may hold the cluster lock (taken
// to restart or stop it) to give the lock back: what it waits for may be
// another agent's step, which needs the lock.
func giveBack(a Action) Action {
	a.ReleaseLock = true
	return a
}

func wait(key, format string, args ...any) Action {
	return Action{Kind: DoWait, Reason: "waiting: " + fmt.Sprintf(format, args...), Key: "wait/" + key}
}

// durations matches the durations a reason may carry ("learner for
// 1m12s"), which must not make a key change on every pass. Counts stay:
// "1 of 3 voters healthy" after "2 of 3" is news.
var durations = regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|ms|h|m|s))+\b`)

// stableKey is a reason without its durations: what the decision is, not
// how long it has held.
func stableKey(reason string) string { return durations.ReplaceAllString(reason, "#") }
