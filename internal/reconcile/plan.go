package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// Options tunes Plan.
type Options struct {
	// LearnerTimeout: a learner or unstarted member pending longer than this
	// is removed. Zero or negative disables the timeout.
	LearnerTimeout time.Duration
}

// StepKind is the kind of change Plan asks for.
type StepKind int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=StepKind -linecomment
const (
	// StepNone: the membership matches the spec.
	StepNone StepKind = iota // none
	// StepWait: the membership differs from the spec but this agent must not
	// change it now; Reason says what blocks it or who else acts.
	StepWait // wait
	// StepRemove: remove MemberID.
	StepRemove // remove
	// StepUpdatePeerURLs: set MemberID's peer URLs to PeerURLs.
	StepUpdatePeerURLs // update-peer-urls
	// StepMoveLeader: move leadership from MemberID (the leader) to To.
	StepMoveLeader // move-leader
	// StepDefrag: defragment MemberID (maintenance, see PlanMaintenance).
	StepDefrag // defrag
	// StepCompact: compact the cluster to Revision (PlanNoSpace).
	StepCompact // compact
	// StepDisarm: disarm the NOSPACE Alarms (PlanNoSpace).
	StepDisarm // disarm
	// StepFull: the data in use fills the quota; NOSPACE stays until an
	// operator deletes data or raises the quota (PlanNoSpace).
	StepFull // data-fills-quota
	// StepDefragOffline: MemberID's own agent stops its etcd, rewrites
	// its db and starts it again (maintenance, see defragWay).
	StepDefragOffline // defrag-offline
)

// Step is the single membership change Plan decided on, with its reason.
type Step struct {
	Kind     StepKind
	MemberID uint64
	Name     string        // the member's name ("" for an unstarted member not in the spec)
	PeerURLs []string      // StepUpdatePeerURLs: the new peer URLs
	To       uint64        // StepMoveLeader: the new leader
	Revision int64         // StepCompact: the revision to compact to
	Alarms   []model.Alarm // StepDisarm: the alarms to disarm
	Reason   string        // one human-readable line
}

// Plan decides the next single membership change for the cluster. It is
// called by the agent holding the cluster-wide lock; it never adds a member
// (each agent registers its own host as a learner) and never promotes one
// (the learner's own agent does).
//
// Plan tries the rules below in order and returns the first change that is
// safe. A change that is due but unsafe does not stop the lower rules: each
// rule checks its own safety, so a blocked removal does not hold back, say,
// a peer URL fix. If nothing is safe, Plan returns the first blocked change
// as StepWait.
func Plan(desired []spec.Member, obs model.Cluster, opt Options) Step {
	v := newPlanView(desired, obs)
	if len(v.members) == 0 {
		return waitStep("waiting: no members observed")
	}
	// Every membership change is a raft proposal: without a leader it
	// cannot commit, and we could not tell who to move leadership from.
	if v.leader == nil {
		return waitStep(noLeaderReason(obs, v))
	}
	var blocked *Step
	for _, rule := range planRules {
		step, due := rule(v, opt)
		if !due {
			continue
		}
		if step.Kind != StepWait {
			return step
		}
		if blocked == nil {
			blocked = &step
		}
	}
	if blocked != nil {
		return *blocked
	}
	return v.idle()
}

// planRules are tried in this order, and the order is the point:
//
//  1. Learners and unstarted members past the learner timeout. A stuck
//     learner holds the only learner slot (--max-learners defaults to 1), so
//     no other host can join until it goes; an unstarted voter counts as a
//     dead voter in every quorum. Clearing them unblocks everything else.
//  2. Dead members the spec does not list. A dead voter raises the quorum
//     without helping to reach it; removing one never lowers the number of
//     healthy voters, and etcd refuses even a learner add while a voter is
//     down ("remove before add"), so a pending join waits on this.
//  3. Peer URL updates. A voter advertising stale URLs is unreachable by its
//     peers; fixing it can bring back a healthy voter before any healthy one
//     is removed.
//  4. Move leadership off a healthy member the spec does not list, so its
//     removal does not force an election on a cluster that then has one
//     voter fewer.
//  5. Healthy members the spec does not list, last: each removal of a healthy
//     voter narrows the margin, so it waits until everything else settled.
var planRules = []func(*planView, Options) (Step, bool){
	removeStalePending,
	removeDeadExtra,
	updatePeerURLs,
	moveLeaderOffExtra,
	removeHealthyExtra,
}

// removeStalePending is rule 1.
func removeStalePending(v *planView, opt Options) (Step, bool) {
	var stale []planMember
	for _, m := range v.members {
		if m.pendingPast(v.now, opt.LearnerTimeout) {
			stale = append(stale, m)
		}
	}
	// Learners first: they hold the slot and their removal needs no quorum.
	// Then the longest pending.
	slices.SortStableFunc(stale, func(a, b planMember) int {
		if a.IsLearner != b.IsLearner {
			return trueFirst(a.IsLearner)
		}
		return a.PendingSince.Compare(b.PendingSince)
	})
	return v.firstRemovable(stale, func(m planMember) string {
		return fmt.Sprintf("%s without progress for %s, past the learner timeout %s",
			m.pendingKind(), v.pendingFor(m), opt.LearnerTimeout)
	})
}

// removeDeadExtra is rule 2.
func removeDeadExtra(v *planView, _ Options) (Step, bool) {
	dead := v.extras(func(m planMember) bool { return !m.serving() })
	return v.firstRemovable(dead, func(m planMember) string {
		if m.Unstarted() {
			return "not in the spec, never started"
		}
		return "not in the spec, unhealthy"
	})
}

// updatePeerURLs is rule 3.
func updatePeerURLs(v *planView, _ Options) (Step, bool) {
	var learner *planMember
	dups := v.duplicates()
	for i, m := range v.members {
		if m.spec == nil || samePeerURLs(m.PeerURLs, m.spec.PeerURLs) {
			continue
		}
		// Of two entries for one host, one cannot have the spec's URLs
		// (etcd refuses a shared peer URL); the host's agent removes it.
		if slices.ContainsFunc(dups, func(d duplicate) bool { return d.name == m.spec.Name }) {
			continue
		}
		// Before etcd 3.6.12 a MemberUpdate on a learner silently promoted
		// it: a learner keeps its URLs until its own agent re-registers it
		// or the learner timeout removes it.
		if m.IsLearner {
			if learner == nil {
				learner = &v.members[i]
			}
			continue
		}
		// etcd refuses an update to a URL another member holds; that member
		// is extra or stale and goes first.
		if owner, ok := v.urlOwner(m.spec.PeerURLs, m.ID); ok {
			return waitStep(fmt.Sprintf("waiting: peer URLs of %s should be %s, but %s still holds one of them",
				m.label, fmtURLList(m.spec.PeerURLs), owner.label)), true
		}
		return Step{
			Kind:     StepUpdatePeerURLs,
			MemberID: m.ID,
			Name:     m.name(),
			PeerURLs: slices.Clone(m.spec.PeerURLs),
			Reason: fmt.Sprintf("update peer URLs of %s: %s -> %s",
				m.label, fmtURLList(m.PeerURLs), fmtURLList(m.spec.PeerURLs)),
		}, true
	}
	if learner != nil {
		return waitStep(fmt.Sprintf("waiting: learner %s has peer URLs %s, spec says %s; "+
			"a learner is never updated, its agent re-registers it",
			learner.label, fmtURLList(learner.PeerURLs), fmtURLList(learner.spec.PeerURLs))), true
	}
	return Step{}, false
}

// moveLeaderOffExtra is rule 4. It only moves leadership when the leader's
// removal would be allowed next; otherwise the election buys nothing.
func moveLeaderOffExtra(v *planView, _ Options) (Step, bool) {
	l := *v.leader
	if l.spec != nil || !l.serving() { // a dead leader is rule 2's
		return Step{}, false
	}
	return v.remove(l, "not in the spec"), true
}

// removeHealthyExtra is rule 5. The leader is left to rule 4.
func removeHealthyExtra(v *planView, _ Options) (Step, bool) {
	healthy := v.extras(func(m planMember) bool { return m.serving() && m.ID != v.leader.ID })
	return v.firstRemovable(healthy, func(planMember) string { return "not in the spec" })
}

// idle is Plan's answer when no rule has a change due: either the
// membership matches the spec, or what is left is for other agents to do.
func (v *planView) idle() Step {
	type note struct{ name, text string }
	var notes []note
	for _, s := range v.missing {
		notes = append(notes, note{s.Name, s.Name + " not registered yet; its agent adds it"})
	}
	for _, d := range v.duplicates() {
		notes = append(notes, note{d.name, fmt.Sprintf(
			"%s is registered %d times (%s); its agent removes the stale entry", d.name, len(d.ids), fmtIDs(d.ids))})
	}
	for _, m := range v.members {
		switch {
		case m.spec == nil: // extras are the rules' business
		case m.Unstarted():
			notes = append(notes, note{m.label, fmt.Sprintf(
				"%s added but not started%s; its agent starts it", m.label, v.pendingSuffix(m))})
		case m.IsLearner:
			notes = append(notes, note{m.label, fmt.Sprintf(
				"%s is a learner%s; its agent promotes it", m.label, v.pendingSuffix(m))})
		}
	}
	if len(notes) > 0 {
		slices.SortStableFunc(notes, func(a, b note) int { return strings.Compare(a.name, b.name) })
		texts := make([]string, len(notes))
		for i, n := range notes {
			texts[i] = n.text
		}
		return waitStep("waiting: " + strings.Join(texts, "; "))
	}
	total, healthy := v.voterCounts()
	reason := fmt.Sprintf("no action: membership matches the spec (%s, %d healthy", pluralCount(total, "voter"), healthy)
	if down := v.unhealthyVoters(0); len(down) > 0 {
		reason += "; unhealthy: " + strings.Join(down, ", ")
	}
	if lag := v.view.Lagging(0); len(lag) > 0 {
		reason += "; " + strings.Join(lag, "; ")
	}
	return Step{Kind: StepNone, Reason: reason + ")"}
}

// firstRemovable returns the removal (or leader move) of the first candidate
// that is safe to remove. When none is, it returns a StepWait naming what
// blocks the first one. why gives the reason each candidate should go.
func (v *planView) firstRemovable(candidates []planMember, why func(planMember) string) (Step, bool) {
	if len(candidates) == 0 {
		return Step{}, false
	}
	var blocked *Step
	for _, m := range candidates {
		step := v.remove(m, why(m))
		if step.Kind != StepWait {
			return step, true
		}
		if blocked == nil {
			blocked = &step
		}
	}
	return *blocked, true
}

// remove returns the step that removes m: StepRemove, StepMoveLeader when m
// leads (etcd would otherwise remove the leader mid-term and force an
// election), or StepWait when removing m is unsafe.
func (v *planView) remove(m planMember, why string) Step {
	if block := v.removalBlocker(m); block != "" {
		return waitStep(fmt.Sprintf("waiting: %s is due for removal (%s), but %s", m.label, why, block))
	}
	if m.ID == v.leader.ID {
		return v.moveLeaderOff(m, why)
	}
	return Step{
		Kind:     StepRemove,
		MemberID: m.ID,
		Name:     m.name(),
		Reason:   fmt.Sprintf("remove %s: %s", m.label, why),
	}
}

// removalBlocker says why removing m would be unsafe, or "" when it is safe.
func (v *planView) removalBlocker(m planMember) string {
	// Plan never removes a started voter the spec lists: a dead one is its
	// own agent's to repair, and losing a healthy one shrinks the cluster
	// below its spec.
	if m.spec != nil && !m.IsLearner && !m.Unstarted() {
		return "it is a started voter in the spec"
	}
	// A learner does not vote: its removal leaves the quorum as it is.
	if m.IsLearner {
		return ""
	}
	if ok, why := v.view.ReadyToRemove(m.ID); !ok {
		return why
	}
	return ""
}

// moveLeaderOff hands leadership from m, due for removal, to the healthy
// spec voter with the highest applied index: the most caught-up one takes
// over fastest.
func (v *planView) moveLeaderOff(m planMember, why string) Step {
	return v.moveLeaderFor(m, "removal", why, planMember.serving)
}

// moveLeaderFor is the one leader move: from m, due for what (removal,
// defragmentation) because of why, to the voter in the spec that fits
// can and best fits to lead (placeRank: not onto a slow disk or a member
// the spec avoids while another can), with the highest applied index.
func (v *planView) moveLeaderFor(m planMember, what, why string, can func(planMember) bool) Step {
	var to *planMember
	for i, c := range v.members {
		if c.spec == nil || c.IsLearner || !can(c) || c.ID == m.ID {
			continue
		}
		if to == nil || v.placeRank(c) < v.placeRank(*to) || (v.placeRank(c) == v.placeRank(*to) && c.RaftIndex > to.RaftIndex) {
			to = &v.members[i]
		}
	}
	if to == nil {
		return waitStep(fmt.Sprintf("waiting: leader %s is due for %s (%s), but no healthy voter in the spec can take over",
			m.label, what, why))
	}
	return Step{
		Kind:     StepMoveLeader,
		MemberID: m.ID,
		Name:     m.name(),
		To:       to.ID,
		Reason: fmt.Sprintf("move leader from %s to %s (applied index %d): %s is due for %s (%s)",
			m.label, to.label, to.RaftIndex, m.label, what, why),
	}
}

func noLeaderReason(obs model.Cluster, v *planView) string {
	if obs.LeaderID == 0 {
		return "waiting: no leader; a membership change needs one"
	}
	for _, m := range v.members {
		if m.ID == obs.LeaderID {
			return fmt.Sprintf("waiting: reported leader %s is not a started voter", m.label)
		}
	}
	return fmt.Sprintf("waiting: reported leader %x is not a member", obs.LeaderID)
}

func waitStep(reason string) Step { return Step{Kind: StepWait, Reason: reason} }

// trueFirst orders true before false.
func trueFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

func samePeerURLs(a, b []string) bool {
	return slices.Equal(urlSet(a), urlSet(b))
}

func urlSet(urls []string) []string {
	s := slices.Clone(urls)
	slices.Sort(s)
	return slices.Compact(s)
}

// pluralCount renders "1 voter", "3 voters".
func pluralCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func fmtIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%x", id)
	}
	return strings.Join(parts, ", ")
}

func fmtURLList(urls []string) string { return "[" + strings.Join(urls, ",") + "]" }

// planView is the observed cluster matched against the spec.
type planView struct {
	members []planMember  // sorted by label, then ID
	missing []spec.Member // spec members with no live member, sorted by name
	leader  *planMember   // nil unless the reported leader is a started voter
	now     time.Time
	cluster model.Cluster
	view    model.View
}

// planMember is a live member and the spec entry it matches, if any.
type planMember struct {
	model.Member
	spec  *spec.Member // nil when the spec does not list it
	label string       // how reasons name it
}

// serving: started and answering. An unstarted member cannot answer a
// status call, whatever the observation says.
func (m planMember) serving() bool { return m.Healthy && !m.Unstarted() }

// name is the member's name, or its spec name while it is unstarted.
func (m planMember) name() string {
	if m.Name == "" && m.spec != nil {
		return m.spec.Name
	}
	return m.Name
}

func (m planMember) pendingKind() string {
	if m.Unstarted() {
		return "unstarted"
	}
	return "learner"
}

// pendingPast: a learner or unstarted member pending longer than timeout.
func (m planMember) pendingPast(now time.Time, timeout time.Duration) bool {
	if !m.IsLearner && !m.Unstarted() {
		return false
	}
	return timeout > 0 && !m.PendingSince.IsZero() && now.Sub(m.PendingSince) > timeout
}

func (v *planView) pendingFor(m planMember) time.Duration {
	return v.now.Sub(m.PendingSince).Round(time.Second)
}

func (v *planView) pendingSuffix(m planMember) string {
	if m.PendingSince.IsZero() {
		return ""
	}
	return " for " + v.pendingFor(m).String()
}

// extras returns the members the spec does not list that keep is true for,
// learners first (no quorum needed), then by label.
func (v *planView) extras(keep func(planMember) bool) []planMember {
	var out []planMember
	for _, m := range v.members {
		if m.spec == nil && keep(m) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b planMember) int {
		if a.IsLearner != b.IsLearner {
			return trueFirst(a.IsLearner)
		}
		return 0
	})
	return out
}

type duplicate struct {
	name string
	ids  []uint64
}

// duplicates lists the spec names more than one live member carries.
func (v *planView) duplicates() []duplicate {
	var out []duplicate
	for _, m := range v.members { // sorted by label, so equal names are adjacent
		if m.spec == nil {
			continue
		}
		if n := len(out); n > 0 && out[n-1].name == m.spec.Name {
			out[n-1].ids = append(out[n-1].ids, m.ID)
			continue
		}
		out = append(out, duplicate{name: m.spec.Name, ids: []uint64{m.ID}})
	}
	return slices.DeleteFunc(out, func(d duplicate) bool { return len(d.ids) < 2 })
}

// urlOwner returns the member other than except that advertises one of urls.
func (v *planView) urlOwner(urls []string, except uint64) (planMember, bool) {
	for _, m := range v.members {
		if m.ID == except {
			continue
		}
		for _, u := range m.PeerURLs {
			if slices.Contains(urls, u) {
				return m, true
			}
		}
	}
	return planMember{}, false
}

func (v *planView) voterCounts() (total, healthy int) {
	return v.view.Voters, v.view.Serving
}

// unhealthyVoters names the voters other than except that are not serving.
func (v *planView) unhealthyVoters(except uint64) []string {
	var names []string
	for _, m := range v.members {
		if !m.IsLearner && !m.serving() && m.ID != except {
			names = append(names, m.label)
		}
	}
	return names
}

// newPlanView matches live members to spec members. The result does not
// depend on the order of either input.
func newPlanView(desired []spec.Member, obs model.Cluster) *planView {
	return planViewOf(desired, obs, model.NewView(obs, nil))
}

// planViewOf is newPlanView on the pass's view, derived already.
func planViewOf(desired []spec.Member, obs model.Cluster, view model.View) *planView {
	specs := slices.Clone(desired)
	slices.SortStableFunc(specs, func(a, b spec.Member) int { return strings.Compare(a.Name, b.Name) })
	live := slices.Clone(obs.Members)
	slices.SortStableFunc(live, func(a, b model.Member) int { return compareIDs(a.ID, b.ID) })

	matched := make([]*spec.Member, len(live))
	var missing []spec.Member
	for i := range specs {
		js := matchSpecByName(specs[i], live)
		if len(js) == 0 {
			if j := matchSpecUnstarted(specs[i], live, matched); j >= 0 {
				js = []int{j}
			}
		}
		if len(js) == 0 {
			missing = append(missing, specs[i])
		}
		for _, j := range js {
			matched[j] = &specs[i]
		}
	}

	v := &planView{missing: missing, now: obs.Now, cluster: obs, view: view}
	for i, m := range live {
		v.members = append(v.members, planMember{Member: m, spec: matched[i], label: memberLabel(m, matched[i])})
	}
	slices.SortStableFunc(v.members, func(a, b planMember) int {
		if c := strings.Compare(a.label, b.label); c != 0 {
			return c
		}
		return compareIDs(a.ID, b.ID)
	})
	for i, m := range v.members {
		if m.ID == obs.LeaderID && obs.LeaderID != 0 && !m.IsLearner && !m.Unstarted() {
			v.leader = &v.members[i]
		}
	}
	return v
}

// matchSpecByName returns the indexes of the live members named like s.
// There can be two while a host rejoins (its old entry and its new learner):
// both belong to s, never extra, because removing the stale one is that
// host's agent's job (its rejoin path) and Plan must not race it.
func matchSpecByName(s spec.Member, live []model.Member) []int {
	var js []int
	for j, m := range live {
		if m.Name != "" && m.Name == s.Name {
			js = append(js, j)
		}
	}
	return js
}

// matchSpecUnstarted returns the index of an unstarted live member sharing a
// peer URL with s, or -1. etcd refuses two members with one peer URL, so a
// shared URL identifies the member before it has a name.
func matchSpecUnstarted(s spec.Member, live []model.Member, matched []*spec.Member) int {
	for j, m := range live {
		if matched[j] != nil || m.Name != "" {
			continue
		}
		for _, u := range m.PeerURLs {
			if slices.Contains(s.PeerURLs, u) {
				return j
			}
		}
	}
	return -1
}

func memberLabel(m model.Member, s *spec.Member) string {
	switch {
	case m.Name != "":
		return m.Name
	case s != nil:
		return s.Name
	}
	return fmt.Sprintf("unstarted member %x", m.ID)
}

func compareIDs(a, b uint64) int { return cmp.Compare(a, b) }

// DiffKind is the kind of one difference between the spec and the cluster.
type DiffKind int

//go:generate go tool -modfile=../../tools/go.mod stringer -type=DiffKind -linecomment
const (
	// DiffMissing: a spec member has no live member.
	DiffMissing DiffKind = iota // missing
	// DiffExtra: a live member the spec does not list.
	DiffExtra // extra
	// DiffPeerURLs: a member's peer URLs differ from its spec entry.
	DiffPeerURLs // peer-urls
	// DiffLearner: a spec member is still a learner.
	DiffLearner // learner
	// DiffUnstarted: a spec member was added but never started.
	DiffUnstarted // unstarted
	// DiffUnhealthy: a started spec member did not answer its status call.
	DiffUnhealthy // unhealthy
	// DiffDuplicate: more than one live member carries a spec name.
	DiffDuplicate // duplicate
)

// DiffLine is one difference between the spec and the cluster.
type DiffLine struct {
	Kind     DiffKind
	Name     string // spec or member name; "unstarted member <id>" for an unknown unstarted one
	MemberID uint64 // 0 for DiffMissing and DiffDuplicate
	Detail   string
}

func (d DiffLine) String() string {
	if d.MemberID == 0 {
		return fmt.Sprintf("%s %s: %s", d.Kind, d.Name, d.Detail)
	}
	return fmt.Sprintf("%s %s (%x): %s", d.Kind, d.Name, d.MemberID, d.Detail)
}

// Diff lists every difference between the spec and the cluster, sorted by
// name, then member ID, then kind. An empty result means they match and
// every member is healthy. Members the spec does not list get one line.
func Diff(desired []spec.Member, obs model.Cluster) []DiffLine {
	v := newPlanView(desired, obs)
	var lines []DiffLine
	for _, s := range v.missing {
		lines = append(lines, DiffLine{Kind: DiffMissing, Name: s.Name,
			Detail: "not in the cluster; its agent registers it as a learner"})
	}
	for _, m := range v.members {
		lines = append(lines, v.diffMember(m)...)
	}
	for _, d := range v.duplicates() {
		lines = append(lines, DiffLine{Kind: DiffDuplicate, Name: d.name,
			Detail: fmt.Sprintf("registered %d times (%s); its agent removes the stale entry", len(d.ids), fmtIDs(d.ids))})
	}
	slices.SortStableFunc(lines, func(a, b DiffLine) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := compareIDs(a.MemberID, b.MemberID); c != 0 {
			return c
		}
		return int(a.Kind) - int(b.Kind)
	})
	return lines
}

func (v *planView) diffMember(m planMember) []DiffLine {
	line := func(k DiffKind, detail string) DiffLine {
		return DiffLine{Kind: k, Name: m.label, MemberID: m.ID, Detail: detail}
	}
	if m.spec == nil {
		return []DiffLine{line(DiffExtra, "not in the spec ("+m.stateWords()+"); removed when safe")}
	}
	var lines []DiffLine
	if !samePeerURLs(m.PeerURLs, m.spec.PeerURLs) {
		lines = append(lines, line(DiffPeerURLs, fmt.Sprintf("peer URLs %s, spec says %s",
			fmtURLList(m.PeerURLs), fmtURLList(m.spec.PeerURLs))))
	}
	switch {
	case m.Unstarted():
		lines = append(lines, line(DiffUnstarted, "added but never started"+v.pendingSuffix(m)))
	case m.IsLearner:
		lines = append(lines, line(DiffLearner, "learner, not promoted yet"+v.pendingSuffix(m)))
	}
	if !m.Unstarted() && !m.Healthy {
		lines = append(lines, line(DiffUnhealthy, "did not answer its status call"))
	}
	return lines
}

// stateWords describes a member in a few words: "voter, healthy".
func (m planMember) stateWords() string {
	role := "voter"
	if m.IsLearner {
		role = "learner"
	}
	switch {
	case m.Unstarted():
		return role + ", unstarted"
	case m.Healthy:
		return role + ", healthy"
	}
	return role + ", unhealthy"
}

// Match is one live member and the spec entry it stands for (nil when the
// spec does not list it), matched the way Plan and Diff match them.
type Match struct {
	model.Member
	Spec  *spec.Member
	Label string // the member's name, its spec name while unstarted, or "unstarted member <id>"
}

// Matches pairs the live members with their spec entries and lists the
// spec members that have no live member, as Plan and Diff see them.
func Matches(desired []spec.Member, obs model.Cluster) (live []Match, missing []spec.Member) {
	v := newPlanView(desired, obs)
	for _, m := range v.members {
		live = append(live, Match{Member: m.Member, Spec: m.spec, Label: m.label})
	}
	return live, v.missing
}
