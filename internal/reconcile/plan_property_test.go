package reconcile

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkeeper/etcdkeeper/internal/model"

	"pgregory.net/rapid"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// genPending draws when a learner or unstarted member was first seen: not
// recorded, recently, or long past the learner timeout.
func genPending(t *rapid.T, label string) time.Time {
	switch rapid.IntRange(0, 2).Draw(t, label) {
	case 1:
		return planNow.Add(-time.Minute)
	case 2:
		return planNow.Add(-time.Hour)
	}
	return time.Time{}
}

// genMember draws the live state of a member advertising peer URL url.
func genMember(t *rapid.T, id uint64, name, url string) model.Member {
	m := model.Member{
		ID:         id,
		Name:       name,
		PeerURLs:   []string{url},
		IsLearner:  rapid.Bool().Draw(t, name+" learner"),
		Healthy:    rapid.IntRange(0, 3).Draw(t, name+" health") > 0, // mostly healthy, like real clusters
		RaftIndex:  rapid.Uint64Range(0, 5).Draw(t, name+" index"),
		ClientURLs: []string{clientURL(name)},
	}
	// A healthy member is mostly caught up; sometimes it lags (F4).
	m.CaughtUp = m.Healthy && rapid.IntRange(0, 3).Draw(t, name+" caught up") > 0
	if rapid.Bool().Draw(t, name+" unstarted") {
		// Healthy is left as drawn: Plan must not trust it for an
		// unstarted member.
		m.Name = ""
	}
	if m.IsLearner || m.Name == "" {
		m.PendingSince = genPending(t, name+" pending")
	}
	if rapid.IntRange(0, 3).Draw(t, name+" moved") == 0 {
		m.PeerURLs = []string{fmt.Sprintf("https://10.0.0.%d:2380", id%250)}
	}
	return m
}

// genCluster draws a spec of 1..7 members and a live cluster of up to 7
// members: spec members in any state (missing, voter, learner, unstarted,
// healthy or not, moved peer URLs) plus extra members (some holding a spec
// member's name or peer URL), and any leader.
func genCluster(t *rapid.T) ([]spec.Member, model.Cluster) {
	desired := specNodes(rapid.IntRange(1, 7).Draw(t, "spec size"))
	ids := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 1<<20), 10, 10, rapid.ID[uint64]).Draw(t, "ids")
	var ms []model.Member
	for i, s := range desired {
		if rapid.IntRange(0, 5).Draw(t, s.Name+" missing") == 0 {
			continue
		}
		ms = append(ms, genMember(t, ids[i], s.Name, s.PeerURLs[0]))
	}
	extras := rapid.IntRange(0, 3).Draw(t, "extras")
	for i := 0; i < extras && len(ms) < 7; i++ {
		name := fmt.Sprintf("extra%d", i)
		if rapid.IntRange(0, 4).Draw(t, name+" takes a spec name") == 0 {
			// A second member with a spec member's name: a host rejoining.
			name = rapid.SampledFrom(desired).Draw(t, name+" name").Name
		}
		url := peerURL(name)
		if rapid.IntRange(0, 3).Draw(t, name+" steals a URL") == 0 {
			// An extra (often unstarted) that holds a spec member's URL.
			url = rapid.SampledFrom(desired).Draw(t, name+" url").PeerURLs[0]
		}
		ms = append(ms, genMember(t, ids[7+i], name, url))
	}
	obs := model.Cluster{Members: ms, Now: planNow}
	obs.LeaderID = genLeader(t, ms)
	return desired, obs
}

// genLeader mostly picks a started voter, as etcd would report, so that
// most draws reach the membership rules, often one the spec does not list
// (leader moves); sometimes no leader, an ID that is not a member, or any
// member at all (a learner, an unstarted one).
func genLeader(t *rapid.T, ms []model.Member) uint64 {
	var started, extras []uint64
	for _, m := range ms {
		if !m.IsLearner && m.Name != "" {
			started = append(started, m.ID)
			if strings.HasPrefix(m.Name, "extra") {
				extras = append(extras, m.ID)
			}
		}
	}
	switch rapid.IntRange(0, 9).Draw(t, "leader kind") {
	case 0:
		return 0
	case 1:
		return 1 << 30 // not a member
	case 2:
		if len(ms) > 0 {
			return rapid.SampledFrom(ms).Draw(t, "leader any").ID
		}
	case 3, 4: // the leader is a member the spec does not list
		if len(extras) > 0 {
			return rapid.SampledFrom(extras).Draw(t, "leader extra")
		}
	}
	if len(started) == 0 {
		return 0
	}
	return rapid.SampledFrom(started).Draw(t, "leader")
}

// startedVoterServing: what counts toward quorum, as the property sees it.
func startedVoterServing(m model.Member) bool { return !m.IsLearner && m.Healthy && m.Name != "" }

func voterCountsOf(ms []model.Member) (voters, healthy int) {
	for _, m := range ms {
		if !m.IsLearner {
			voters++
		}
		if startedVoterServing(m) {
			healthy++
		}
	}
	return voters, healthy
}

func memberByID(ms []model.Member, id uint64) (model.Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return model.Member{}, false
}

func specNamed(desired []spec.Member, name string) (spec.Member, bool) {
	for _, s := range desired {
		if s.Name == name {
			return s, true
		}
	}
	return spec.Member{}, false
}

func TestPlanProperties(t *testing.T) {
	opt := Options{LearnerTimeout: planTimeout}
	rapid.Check(t, func(t *rapid.T) {
		desired, obs := genCluster(t)
		step := Plan(desired, obs, opt)

		if step.Reason == "" || strings.Contains(step.Reason, "\n") {
			t.Fatalf("reason %q is not one line", step.Reason)
		}
		leader, ok := memberByID(obs.Members, obs.LeaderID)
		validLeader := ok && obs.LeaderID != 0 && !leader.IsLearner && leader.Name != ""
		acts := step.Kind != StepNone && step.Kind != StepWait
		// (d) nothing but None/Wait without a leader.
		if acts && !validLeader {
			t.Fatalf("leader %x (valid %v): got %v %q", obs.LeaderID, validLeader, step.Kind, step.Reason)
		}
		var target model.Member
		if acts {
			if target, ok = memberByID(obs.Members, step.MemberID); !ok {
				t.Fatalf("%v targets unknown member %x", step.Kind, step.MemberID)
			}
		}
		switch step.Kind {
		case StepRemove:
			checkRemove(t, desired, obs, opt, target)
		case StepUpdatePeerURLs:
			checkUpdate(t, desired, target, step)
		case StepMoveLeader:
			checkMoveLeader(t, desired, obs, step)
		case StepNone:
			for _, l := range Diff(desired, obs) {
				if l.Kind != DiffUnhealthy {
					t.Fatalf("StepNone (%q) but Diff has %s", step.Reason, l)
				}
			}
		}
		checkOrderFree(t, desired, obs, opt, step)
	})
}

func checkRemove(t *rapid.T, desired []spec.Member, obs model.Cluster, opt Options, m model.Member) {
	if m.ID == obs.LeaderID {
		t.Fatalf("removes the leader %x without moving leadership first", m.ID)
	}
	_, inSpec := specNamed(desired, m.Name)
	// (c) never a started voter the spec lists (healthy or not).
	if inSpec && m.Name != "" && !m.IsLearner {
		t.Fatalf("removes started spec voter %s", m.Name)
	}
	// A named spec member goes only as a learner past its timeout.
	stale := !m.PendingSince.IsZero() && obs.Now.Sub(m.PendingSince) > opt.LearnerTimeout
	if inSpec && m.Name != "" && !stale {
		t.Fatalf("removes spec member %s that is not past the learner timeout", m.Name)
	}
	if m.IsLearner {
		return // the voter set, and so the quorum, is unchanged
	}
	after := slices.DeleteFunc(slices.Clone(obs.Members), func(x model.Member) bool { return x.ID == m.ID })
	voters, healthy := voterCountsOf(after)
	// (b) never the last voter.
	if voters == 0 {
		t.Fatalf("removes the last voter %x", m.ID)
	}
	// (a) the healthy voters left form a quorum of the new voter set.
	if healthy < voters/2+1 {
		t.Fatalf("removing %x leaves %d of %d voters healthy", m.ID, healthy, voters)
	}
	// (a') and, when the removed voter served, caught-up ones (F4).
	if startedVoterServing(m) {
		up := 0
		for _, x := range after {
			if startedVoterServing(x) && x.CaughtUp {
				up++
			}
		}
		if up < voters/2+1 {
			t.Fatalf("removing serving %x leaves %d of %d voters caught up", m.ID, up, voters)
		}
	}
}

func checkUpdate(t *rapid.T, desired []spec.Member, m model.Member, step Step) {
	// (e) never on a learner.
	if m.IsLearner {
		t.Fatalf("updates learner %x", m.ID)
	}
	s, ok := specNamed(desired, step.Name)
	if !ok || !reflect.DeepEqual(step.PeerURLs, s.PeerURLs) {
		t.Fatalf("updates %x to %v, not to spec member %q's URLs", m.ID, step.PeerURLs, step.Name)
	}
	if slices.Equal(m.PeerURLs, s.PeerURLs) {
		t.Fatalf("updates %s whose URLs already match", step.Name)
	}
}

func checkMoveLeader(t *rapid.T, desired []spec.Member, obs model.Cluster, step Step) {
	if step.MemberID != obs.LeaderID {
		t.Fatalf("moves leadership from %x, leader is %x", step.MemberID, obs.LeaderID)
	}
	// (f) to a healthy started voter in the spec.
	to, ok := memberByID(obs.Members, step.To)
	if _, inSpec := specNamed(desired, to.Name); !ok || !inSpec || !startedVoterServing(to) {
		t.Fatalf("moves leadership to %+v, not a healthy spec voter", to)
	}
}

// checkOrderFree is (g): the same input in another order gives the same
// step and the same diff.
func checkOrderFree(t *rapid.T, desired []spec.Member, obs model.Cluster, opt Options, want Step) {
	if again := Plan(desired, obs, opt); !reflect.DeepEqual(again, want) {
		t.Fatalf("second call gives %+v, first %+v", again, want)
	}
	shuffled := obs
	shuffled.Members = rapid.Permutation(obs.Members).Draw(t, "shuffled members")
	d := rapid.Permutation(desired).Draw(t, "shuffled spec")
	if got := Plan(d, shuffled, opt); !reflect.DeepEqual(got, want) {
		t.Fatalf("shuffled input gives %+v, want %+v", got, want)
	}
	if a, b := Diff(desired, obs), Diff(d, shuffled); !reflect.DeepEqual(a, b) {
		t.Fatalf("shuffled Diff differs:\n%v\n%v", a, b)
	}
}
