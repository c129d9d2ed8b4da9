package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// View is the cluster as every rule reads it, derived once per pass from
// the observation (NewView) and never changed after: who votes, who
// serves, who has caught up, raft's quorum and how many more voters may
// stop, who leads, who is out of service now and why, NOSPACE. The
// decisions, `status`, `plan` and the commands all read it; nothing else
// counts a quorum. The guards are named by the operation they allow, as
// etcd's membership.RaftCluster names its own (IsReadyToRemoveVotingMember):
// ReadyToRemove, ReadyToStop, ServesWithout, HasQuorum.
type View struct {
	Now time.Time
	// Leader is the member most members follow (0: none known).
	Leader uint64
	// Voters counts every voter, started or not: raft counts them all.
	// Serving counts the started voters that answered as themselves
	// (Healthy); CaughtUp those of them that have caught up (CaughtUp).
	Voters, Serving, CaughtUp int
	// Quorum is raft's quorum of Voters.
	Quorum int
	// FailureTolerance is how many caught-up voters may stop before
	// writes wait: CaughtUp - Quorum (negative: below a quorum already).
	FailureTolerance int
	// Disrupted are the members out of service now, and why: not
	// answering (stopped, restarting, defragmenting, frozen), joining or
	// being repaired (learner, unstarted), defragmented by an agent.
	Disrupted []Disruption
	// NoSpace: etcd raised NOSPACE, or a member's db file reached its
	// quota (the next write raises it).
	NoSpace bool
	// Alarms are the cluster's active alarms.
	Alarms []Alarm
	// SlowDisks are the voters whose disks their agents measured far
	// slower than the others' (slowDisks).
	SlowDisks []SlowDisk

	members []Member
	diskP99 map[uint64]time.Duration
}

// Disruption is one member out of service, and why.
type Disruption struct {
	ID   uint64
	Name string
	Why  string
	// HostTurn: its host holds the host turn (Cluster.Turn).
	HostTurn bool `json:",omitempty"`
}

// NewView derives the view of observation c; recs are the agents'
// records (nil: not read), which say what an agent does to its member.
func NewView(c Cluster, recs []AgentRecord) View {
	v := View{Now: c.Now, Leader: c.LeaderID, Alarms: slices.Clone(c.Alarms), members: slices.Clone(c.Members)}
	slices.SortFunc(v.members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	defragmenting := map[uint64]string{}
	for _, r := range recs {
		if r.Defragmenting != 0 {
			defragmenting[r.Defragmenting] = r.Name
		}
	}
	v.diskP99 = map[uint64]time.Duration{}
	v.SlowDisks = slowDisks(v.members, recs, v.diskP99)
	for _, m := range v.members {
		if !m.IsLearner {
			v.Voters++
			if serving(m) {
				v.Serving++
				if m.CaughtUp {
					v.CaughtUp++
				}
			}
		}
		why := disruptedWhy(m, defragmenting[m.ID])
		inTurn := c.Turn != nil && (c.Turn.MemberID == m.ID || (c.Turn.MemberID == 0 && c.Turn.Member == m.Name))
		if inTurn {
			// Out of service for the budget from the moment it is taken:
			// its host may stop it at any time, and until the member is
			// caught up again.
			if why == "" {
				why = "in " + c.Turn.Text()
			} else {
				why = "in " + c.Turn.Text() + ": " + why
			}
		}
		if why != "" {
			v.Disrupted = append(v.Disrupted, Disruption{ID: m.ID, Name: labelOf(m), Why: why, HostTurn: inTurn})
		}
		if m.Quota > 0 && m.DBSize >= m.Quota {
			v.NoSpace = true
		}
	}
	if slices.ContainsFunc(c.Alarms, func(a Alarm) bool { return a.Type == AlarmNoSpace }) {
		v.NoSpace = true
	}
	v.Quorum = Quorum(v.Voters)
	v.FailureTolerance = v.CaughtUp - v.Quorum
	return v
}

// Quorum is the number of voters raft needs to commit.
func Quorum(voters int) int { return voters/2 + 1 }

// serving: a started member that answered as itself. An unstarted member
// cannot answer a status call, whatever its status said.
func serving(m Member) bool { return m.Healthy && !m.Unstarted() }

func disruptedWhy(m Member, defragBy string) string {
	switch {
	case m.Unstarted():
		return "added but not started (a join is under way)"
	case m.IsLearner:
		return "a learner (a join or repair is under way)"
	case defragBy != "":
		return "defragmented by agent " + defragBy
	case !m.Healthy:
		if m.Err != "" {
			return "not a healthy voter (" + m.Err + ")"
		}
		return "not a healthy voter"
	}
	return ""
}

func labelOf(m Member) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("unstarted member %x", m.ID)
}

// Members are the observed members, by ID.
func (v View) Members() []Member { return slices.Clone(v.members) }

// Member is the member with id.
func (v View) Member(id uint64) (Member, bool) {
	i := slices.IndexFunc(v.members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return Member{}, false
	}
	return v.members[i], true
}

// Voter: id is a started voter.
func (v View) Voter(id uint64) bool {
	m, ok := v.Member(id)
	return ok && !m.IsLearner && !m.Unstarted()
}

// DisruptedExcept are the members out of service other than id.
func (v View) DisruptedExcept(id uint64) []Disruption {
	return slices.DeleteFunc(slices.Clone(v.Disrupted), func(d Disruption) bool { return d.ID == id })
}

// counts are the voters without id (id 0: all of them), and how many of
// those serve and how many have caught up.
func (v View) counts(except uint64) (voters, serve, up int) {
	for _, m := range v.members {
		if m.IsLearner || (except != 0 && m.ID == except) {
			continue
		}
		voters++
		if serving(m) {
			serve++
			if m.CaughtUp {
				up++
			}
		}
	}
	return voters, serve, up
}

// HasQuorum: a quorum of every voter serves. The detail counts them.
func (v View) HasQuorum() (bool, string) {
	return v.Voters > 0 && v.Serving >= v.Quorum, fmt.Sprintf("%d of %d voters healthy (quorum %d)", v.Serving, v.Voters, v.Quorum)
}

// ServesWithout: the voters other than id, which does not serve now, form
// a serving quorum of the membership without it: the cluster works
// without id, so id's silence is its own (a stuck member may be stopped,
// a stale one removed).
func (v View) ServesWithout(id uint64) (bool, string) {
	voters, serve, _ := v.counts(id)
	q := Quorum(voters)
	return voters > 0 && serve >= q, fmt.Sprintf("%d of %d voters healthy (quorum %d)", serve, voters, q)
}

// ReadyToRemove says whether removing member id keeps a quorum, and why
// not. A learner votes on nothing: always. The last voter: never. A voter
// that serves takes its vote with it: the caught-up voters left must be a
// quorum of the voters left (one that just came back may be thousands of
// entries behind, and writes would wait on it). A voter that does not
// serve takes no vote with it: the serving voters left must be that
// quorum.
func (v View) ReadyToRemove(id uint64) (bool, string) {
	m, ok := v.Member(id)
	if ok && m.IsLearner {
		return true, "a learner votes on nothing"
	}
	voters, serve, up := v.counts(id)
	q := Quorum(voters)
	switch {
	case voters == 0:
		return false, "it is the last voter"
	case ok && serving(m) && up < q:
		return false, fmt.Sprintf("removing it would leave %d of %s caught up, below quorum %d%s%s", up, plural(voters, "voter"), q, v.down(id), v.lagging(id))
	case !(ok && serving(m)) && serve < q:
		return false, fmt.Sprintf("removing it would leave %d of %s healthy, below quorum %d%s", serve, plural(voters, "voter"), q, v.down(id))
	}
	return true, fmt.Sprintf("%d of %s left caught up (quorum %d)", up, plural(voters, "voter"), q)
}

// ReadyToStop says whether voter id may stop serving for a while and stay
// a voter (a restart, a defragmentation, a stop for repair): raft's quorum
// is still that of every voter, id included, and the caught-up others
// must reach it, or writes wait. For an odd number of voters that is a
// quorum of the others; for an even number one more (2 of 4 caught-up
// others are no quorum of 4, the leader alone none of 2). One voter alone
// is never ready: nothing would serve (the disruption budget says when
// that is all there is to do).
func (v View) ReadyToStop(id uint64) (bool, string) {
	others, _, up := v.counts(id)
	detail := fmt.Sprintf("%d of %d voters caught up (quorum %d)", up, others, v.Quorum)
	if lag := v.Lagging(id); len(lag) > 0 {
		detail += "; " + strings.Join(lag, "; ")
	}
	return v.Voters > 0 && up >= v.Quorum, detail
}

// down names, for a refusal about id, the other voters that do not
// serve; lagging those that lag.
func (v View) down(id uint64) string {
	if d := v.Unhealthy(id); len(d) > 0 {
		return " (unhealthy: " + strings.Join(d, ", ") + ")"
	}
	return ""
}

func (v View) lagging(id uint64) string {
	if lag := v.Lagging(id); len(lag) > 0 {
		return " (" + strings.Join(lag, "; ") + ")"
	}
	return ""
}

// Unhealthy names the voters other than except that do not serve.
func (v View) Unhealthy(except uint64) []string {
	var names []string
	for _, m := range v.members {
		if !m.IsLearner && m.ID != except && !serving(m) {
			names = append(names, labelOf(m))
		}
	}
	return names
}

// Lagging says, for each voter other than except that answers but is not
// caught up, why not ("node3 is catching up (index 1200 behind the
// leader)").
func (v View) Lagging(except uint64) []string {
	var out []string
	for _, m := range v.members {
		if !m.IsLearner && m.ID != except && m.Healthy && !m.CaughtUp && m.Lag != "" {
			out = append(out, m.Lag)
		}
	}
	return out
}

// LagOf is why member id has not caught up, for people.
func (v View) LagOf(id uint64) string {
	m, _ := v.Member(id)
	if m.Lag != "" {
		return m.Lag
	}
	return labelOf(m) + " is not caught up with the leader"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
