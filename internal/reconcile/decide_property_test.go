package reconcile

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

// genRunning draws a pass of a running local voter in a live cluster of
// 1..5 spec members: health, catching up, leader, a restart due (settings,
// etcd binary, agent binary), NOSPACE with or without a raised quota,
// fragmented db files, the lock held or not, and the agents' records.
// It is the input space of every voluntary disruption: rolling restarts,
// defragmentation, the NOSPACE procedure, the quota raise, the repair
// stop.
func genRunning(t *rapid.T) Input {
	n := rapid.IntRange(1, 7).Draw(t, "members")
	desired := specNodes(n)
	noSpace := rapid.IntRange(0, 2).Draw(t, "nospace") == 0
	c := model.Cluster{ClusterID: 0xc1, Now: planNow}
	for i, s := range desired {
		id := uint64(i + 1)
		m := model.Member{ID: id, Name: s.Name, PeerURLs: s.PeerURLs, ClientURLs: s.ClientURLs, RaftIndex: 100,
			Healthy:   rapid.IntRange(0, 6).Draw(t, s.Name+" health") > 0,
			IsLearner: i > 0 && rapid.IntRange(0, 6).Draw(t, s.Name+" learner") == 0,
			Quota:     16 * mib, DBSize: 4 * mib, DBSizeInUse: 3 * mib}
		m.CaughtUp = m.Healthy && rapid.IntRange(0, 4).Draw(t, s.Name+" caught up") > 0
		if !m.CaughtUp && m.Healthy {
			m.Lag = s.Name + " is catching up"
		}
		switch rapid.IntRange(0, 3).Draw(t, s.Name+" db") {
		case 1: // fragmented
			m.DBSize, m.DBSizeInUse = 12*mib, 2*mib
		case 2: // at the line
			m.DBSize, m.DBSizeInUse = 16*mib, 3*mib
		}
		c.Members = append(c.Members, m)
	}
	var started []uint64
	for _, m := range c.Members {
		if !m.IsLearner {
			started = append(started, m.ID)
		}
	}
	c.LeaderID = rapid.SampledFrom(started).Draw(t, "leader")
	for i := range c.Members {
		if c.Members[i].Healthy {
			c.Members[i].Leader = c.LeaderID
		}
	}
	if noSpace {
		c.Alarms = []model.Alarm{{MemberID: c.LeaderID, Type: model.AlarmNoSpace}}
	}
	selfID := rapid.SampledFrom(started).Draw(t, "self")
	self := c.Members[selfID-1]
	self.Healthy = true // it answers: the pass's own etcd
	c.Members[selfID-1] = self
	in := Input{Self: desired[selfID-1], InSpec: true, Desired: desired, Generation: "g1", LearnerTimeout: planTimeout,
		Cluster: &c, Now: planNow,
		Defrag:  DefragPolicy{Enabled: rapid.Bool().Draw(t, "defrag on"), MinFreeRatio: 0.5, MinFreeBytes: mib, Offline: rapid.Bool().Draw(t, "offline")},
		NoSpace: NoSpacePolicy{Compact: true, Quotas: map[string]int64{}}}
	if rapid.Bool().Draw(t, "quota raised") {
		for _, s := range desired {
			in.NoSpace.Quotas[s.Name] = 64 * mib
		}
	}
	in.MaxDisrupted = rapid.IntRange(1, 3).Draw(t, "maintenance.maxDisrupted")
	in.Local = model.Local{Running: true, LockHeld: rapid.Bool().Draw(t, "lock held"),
		Answer: &model.Answer{MemberID: selfID, ClusterID: 0xc1, Leader: c.LeaderID, Revision: 50, Alarms: c.Alarms}}
	switch rapid.IntRange(0, 3).Draw(t, "restart") {
	case 1:
		in.Local.Restart = model.Restart{Why: "changed settings"}
	case 2:
		in.Local.Restart = model.Restart{Why: "etcd 3.7.2 → 3.7.3", EtcdFrom: "3.7.2", EtcdTo: "3.7.3"}
	case 3:
		in.Local.Restart = model.Restart{Why: "etcdkeeper 0.9 → 1.0", Agent: true}
	}
	if rapid.IntRange(0, 2).Draw(t, "turn wished") == 0 {
		in.Local.Turn = model.TurnLocal{Wish: &model.TurnWish{ID: "w", Kind: model.TurnGuard, Why: "guard: systemctl reboot"}, Active: true}
	}
	if others := slicesWithout(started, selfID); len(others) > 0 && rapid.IntRange(0, 3).Draw(t, "turn held") == 0 {
		holder := rapid.SampledFrom(others).Draw(t, "turn holder")
		c.Turn = &model.HostTurn{ID: "t", Member: c.Members[holder-1].Name, MemberID: holder, Why: "guard: apt-get -y dist-upgrade", Since: planNow, Renewed: planNow}
	}
	in.TurnTimeout = 15 * time.Minute
	in.Memory = model.Memory{Compacted: 50, Defragmented: map[uint64]model.DefragMark{}, RolloutSnapshot: RolloutKey(in.Generation, in.Local.Restart)}
	if rapid.IntRange(0, 3).Draw(t, "records") > 0 {
		for _, m := range c.Members {
			r := model.AgentRecord{Name: m.Name, Generation: "g1", MemberID: m.ID, DefragOffline: rapid.Bool().Draw(t, m.Name+" defragments offline")}
			if m.ID != selfID && rapid.IntRange(0, 2).Draw(t, m.Name+" pending") == 0 {
				r.RestartPending = "changed settings"
			}
			if m.ID != selfID && rapid.IntRange(0, 3).Draw(t, m.Name+" wants a turn") == 0 {
				r.WantsTurn = "guard: systemctl reboot"
			}
			in.Agents = append(in.Agents, r)
		}
	}
	return in
}

// TestDecideTakesLockedStepsUnderTheLock: a step that needs the cluster
// lock (Action.NeedsLock) is decided only while the lock is held, unless
// it is one the NOSPACE procedure's single actor takes without it. A
// decision that asks for such a step without the lock is refused by the
// step, pass after pass (G2: a one-member cluster never restarted).
func TestDecideTakesLockedStepsUnderTheLock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genRunning(t)
		in.Local.LockHeld = false
		act := Decide(in)
		if act.NeedsLock() && !act.Unlocked {
			t.Fatalf("%s (%s) decided without the lock, and not as an unlocked step", act.Kind, act.Reason)
		}
	})
}

// disruptionOf is the member an action takes out of service for a while,
// if it does.
func disruptionOf(in Input, act Action) (uint64, bool) {
	switch act.Kind {
	case DoRestart, DoStopForRepair:
		return in.Local.Answer.MemberID, true
	case DoDefrag, DoDefragOffline:
		return act.Step.MemberID, true
	case DoTakeTurn:
		return in.Local.Answer.MemberID, true
	}
	return 0, false
}

func slicesWithout(ids []uint64, id uint64) []uint64 {
	var out []uint64
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// TestDisruptionBudgetProperty: no voluntary disruption a pass grants
// (restart, defragmentation, repair stop; under NOSPACE too) leaves fewer
// than a quorum of every voter serving and caught up, counting the member
// it disrupts as gone; nor does it disrupt the leader (leadership is
// handed off first). Two exceptions, each named: a one-voter cluster,
// which has no one to keep serving; and NOSPACE, where writes are refused
// already and the others need only be a quorum of the voters without the
// member (the reads it serves are what a stop costs then). A host turn
// is the one member out of service, whatever maintenance.maxDisrupted
// says: it is taken only while no other member is out, and while it is
// held nothing is disrupted but by a repair stop (the corrupt member has
// failed already).
func TestDisruptionBudgetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genRunning(t)
		act := Decide(in)
		id, disrupts := disruptionOf(in, act)
		if !disrupts {
			return
		}
		voters, up := 0, 0
		for _, m := range in.Cluster.Members {
			if m.IsLearner {
				continue
			}
			voters++
			if m.ID != id && m.Healthy && m.CaughtUp {
				up++
			}
		}
		if voters == 1 {
			return
		}
		need := model.Quorum(voters)
		if noSpaceIn(in) {
			need = model.Quorum(voters - 1)
		}
		if up < need {
			t.Fatalf("%s of %x (%s) leaves %d of %d voters serving and caught up, below %d", act.Kind, id, act.Reason, up, voters, need)
		}
		if id == in.Cluster.LeaderID && act.Kind != DoStopForRepair {
			t.Fatalf("%s disrupts the leader %x without a hand-off (%s)", act.Kind, id, act.Reason)
		}
		if tr := in.Cluster.Turn; tr != nil && act.Kind != DoStopForRepair {
			t.Fatalf("%s of %x (%s) while %s holds the host turn (maintenance.maxDisrupted %d, %d voters): a host turn is the one disruption while it lasts",
				act.Kind, id, act.Reason, tr.Member, in.MaxDisrupted, voters)
		}
		if act.Kind == DoTakeTurn && in.Cluster.Turn != nil {
			t.Fatalf("took a host turn while %s holds it", in.Cluster.Turn.Member)
		}
		if out := in.View().DisruptedExcept(id); act.Kind == DoTakeTurn && len(out) > 0 {
			t.Fatalf("took a host turn while %s is out of service (%s; maintenance.maxDisrupted %d, %d voters)", out[0].Name, out[0].Why, in.MaxDisrupted, voters)
		}
	})
}

func noSpaceIn(in Input) bool {
	for _, a := range in.Cluster.Alarms {
		if a.Type == model.AlarmNoSpace {
			return true
		}
	}
	for _, m := range in.Cluster.Members {
		if m.Quota > 0 && m.DBSize >= m.Quota {
			return true
		}
	}
	return false
}
