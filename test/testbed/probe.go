package testbed

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// answerWithin bounds each question the observer asks: the member list,
// the alarm list and each member's status. A live member answers in
// milliseconds even on a loaded 2-core machine, so one that takes longer
// than a second counts as not answering in that observation; the callers
// poll, so a slow answer delays a verdict rather than failing it. An
// observation takes at most twice this: the member list, then the alarms
// and every status in parallel.
const answerWithin = time.Second

// MemberState is one member as the member list shows it, and what its own
// client URL answered.
type MemberState struct {
	ID         uint64
	Name       string   // "" until the member first starts
	PeerURLs   []string // as listed
	ClientURLs []string // empty until the member first starts
	Learner    bool

	// AsItself: the member's own client URL answered Status with this
	// member's ID. A member re-added on its host reuses the host's URLs,
	// so the URL of a stale entry answers as the new member: that answer
	// is not the stale member's.
	AsItself bool
	// NoAnswer says why it did not answer as itself ("" when it did).
	NoAnswer string
	// What it answered as itself.
	Leader       uint64 // the leader it knows, 0 for none
	RaftTerm     uint64
	RaftIndex    uint64
	AppliedIndex uint64
	DBSize       int64
	DBSizeInUse  int64 // the db's pages in use; DBSize minus this is free
	// Alarms are the cluster's alarms that name this member.
	Alarms []pb.AlarmType
}

// Started reports whether the member has started once: etcd lists a member
// added but never started without client URLs (and without a name).
func (m MemberState) Started() bool { return len(m.ClientURLs) > 0 }

// Unhealthy says why the member is not healthy, "" when it is. This is the
// test bed's one health rule: healthy = answered as itself, knows a
// leader, and no alarm names it.
func (m MemberState) Unhealthy() string {
	switch {
	case !m.AsItself:
		return "no answer as itself: " + m.NoAnswer
	case m.Leader == 0:
		return "knows no leader"
	case len(m.Alarms) > 0:
		return fmt.Sprintf("alarms %v", m.Alarms)
	}
	return ""
}

// Healthy is the health rule of Unhealthy as a yes or no.
func (m MemberState) Healthy() bool { return m.Unhealthy() == "" }

// HealthyVoter: healthy and not a learner.
func (m MemberState) HealthyVoter() bool { return m.Healthy() && !m.Learner }

// Observation is the cluster as the observer saw it once.
type Observation struct {
	Start, End time.Time
	// Err: the member list or the alarm list got no answer (no leader, or
	// no quorum reachable through the client); Members is then empty.
	Err     error
	Members []MemberState
	// Alarms are all the cluster's active alarms, also those naming a
	// member that is no longer listed.
	Alarms []*pb.AlarmMember
}

// Observe is the test bed's one observer, the way the integration tests,
// the bench and the chaos run see a cluster: it lists the members through
// cli, then asks the cluster for its alarms and each started member's own
// client URL for its status, all in parallel, each question bounded by
// answerWithin.
//
// It is the oracle that judges the system under test, so it deliberately
// shares no code with it: this file imports nothing from
// github.com/etcdkeeper/etcdkeeper/internal/... (the agents observe the
// cluster with internal/cluster; a bug there must not judge itself), only
// etcd's own client, and states its health rule once (MemberState.Unhealthy).
func Observe(cli *clientv3.Client) Observation {
	o := Observation{Start: time.Now()}
	o.Members, o.Alarms, o.Err = observeMembers(cli)
	if o.Err != nil {
		o.Members, o.Alarms = nil, nil
	}
	o.End = time.Now()
	return o
}

func observeMembers(cli *clientv3.Client) ([]MemberState, []*pb.AlarmMember, error) {
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	list, err := cli.MemberList(ctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("member list: %w", err)
	}
	members := make([]MemberState, len(list.Members))
	var alarms []*pb.AlarmMember
	var alarmErr error
	var wg sync.WaitGroup
	wg.Go(func() { alarms, alarmErr = alarmList(cli) })
	for i, m := range list.Members {
		members[i] = MemberState{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
		if members[i].Started() {
			wg.Go(func() { askStatus(cli, &members[i]) })
		}
	}
	wg.Wait()
	if alarmErr != nil {
		return nil, nil, fmt.Errorf("alarm list: %w", alarmErr)
	}
	for i := range members {
		members[i].Alarms = alarmsOf(alarms, members[i].ID)
	}
	return members, alarms, nil
}

func alarmList(cli *clientv3.Client) ([]*pb.AlarmMember, error) {
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, err
	}
	return resp.Alarms, nil
}

// alarmsOf picks the alarms raised for member id.
func alarmsOf(alarms []*pb.AlarmMember, id uint64) []pb.AlarmType {
	var out []pb.AlarmType
	for _, a := range alarms {
		if a.MemberID == id && a.Alarm != pb.AlarmType_NONE {
			out = append(out, a.Alarm)
		}
	}
	return out
}

// askStatus asks the member's first client URL for its status. cli.Status
// dials the URL afresh (with cli's TLS), so a restarted member is seen at
// once, without a reconnect backoff.
func askStatus(cli *clientv3.Client, m *MemberState) {
	endpoint := m.ClientURLs[0]
	if err := listening(endpoint); err != nil {
		m.NoAnswer = err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		m.NoAnswer = fmt.Sprintf("status of %s: %v", endpoint, err)
		return
	}
	if st.Header.MemberId != m.ID {
		m.NoAnswer = fmt.Sprintf("%s answers as member %x", endpoint, st.Header.MemberId)
		return
	}
	m.AsItself = true
	m.Leader, m.RaftTerm, m.RaftIndex, m.AppliedIndex = st.Leader, st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex
	m.DBSize = st.DbSize
	m.DBSizeInUse = st.DbSizeInUse
}

// listening connects to the endpoint's port first: a stopped member
// refuses at once, whereas etcd's client retries a refused connection
// until its deadline, and every observation of a stopped member would
// cost answerWithin.
func listening(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("client URL %q: %w", endpoint, err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, answerWithin)
	if err != nil {
		return err
	}
	return conn.Close()
}

// ByName is the member listed under name.
func (o Observation) ByName(name string) (MemberState, bool) {
	for _, m := range o.Members {
		if m.Name == name {
			return m, true
		}
	}
	return MemberState{}, false
}

// ByID is the member listed with id.
func (o Observation) ByID(id uint64) (MemberState, bool) {
	for _, m := range o.Members {
		if m.ID == id {
			return m, true
		}
	}
	return MemberState{}, false
}

// ID is the ID of the member listed under name, 0 when none is.
func (o Observation) ID(name string) uint64 {
	m, _ := o.ByName(name)
	return m.ID
}

// Voters are the members that are not learners, started or not.
func (o Observation) Voters() []MemberState {
	var out []MemberState
	for _, m := range o.Members {
		if !m.Learner {
			out = append(out, m)
		}
	}
	return out
}

// HealthyVoter reports whether the member listed under name is a healthy
// voter.
func (o Observation) HealthyVoter(name string) bool {
	m, ok := o.ByName(name)
	return ok && m.HealthyVoter()
}

// Leader is the leader that the healthy members know, 0 when none knows
// one or they disagree (an election is under way).
func (o Observation) Leader() uint64 {
	var leader uint64
	for _, m := range o.Members {
		if !m.Healthy() {
			continue
		}
		if leader != 0 && m.Leader != leader {
			return 0
		}
		leader = m.Leader
	}
	return leader
}

// ExactVoters checks that the members are exactly names, each a started,
// healthy voter, and returns their IDs by name; otherwise nil and why not,
// in one line.
func (o Observation) ExactVoters(names ...string) (map[string]uint64, string) {
	if o.Err != nil {
		return nil, o.Err.Error()
	}
	ids := map[string]uint64{}
	for _, m := range o.Members {
		if why := notOneOf(m, names, ids); why != "" {
			return nil, why
		}
		ids[m.Name] = m.ID
	}
	if lost := missing(names, ids); len(lost) > 0 {
		return nil, "missing " + strings.Join(lost, ",")
	}
	return ids, ""
}

// notOneOf says why member m is not one of the healthy voters names,
// given the ones already found; "" when it is.
func notOneOf(m MemberState, names []string, found map[string]uint64) string {
	switch {
	case !m.Started():
		return fmt.Sprintf("member %x never started", m.ID)
	case !slices.Contains(names, m.Name):
		return fmt.Sprintf("extra member %s (%x)", m.Name, m.ID)
	case found[m.Name] != 0:
		return fmt.Sprintf("two members named %s (%x, %x)", m.Name, found[m.Name], m.ID)
	case m.Learner:
		return fmt.Sprintf("%s (%x) is a learner", m.Name, m.ID)
	case !m.Healthy():
		return fmt.Sprintf("%s (%x) unhealthy: %s", m.Name, m.ID, m.Unhealthy())
	}
	return ""
}

func missing(names []string, found map[string]uint64) []string {
	var out []string
	for _, n := range names {
		if _, ok := found[n]; !ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Await observes the cluster through cli every `every` until ok accepts an
// observation (says ""), and returns that observation. An observation
// without an answer (Err) is not shown to ok. Past d it fails with the
// last reason.
func Await(cli *clientv3.Client, d, every time.Duration, ok func(Observation) string) (Observation, error) {
	deadline := time.Now().Add(d)
	for {
		o := Observe(cli)
		why := ""
		if o.Err != nil {
			why = o.Err.Error()
		} else if why = ok(o); why == "" {
			return o, nil
		}
		if time.Now().Add(every).After(deadline) {
			return Observation{}, fmt.Errorf("not within %s: %s", d, why)
		}
		time.Sleep(every)
	}
}

// AwaitOverlapping is Await for a measurement: it starts an observation
// every `every` whether or not the previous ones have finished (at most
// maxInFlight at once), and returns the first accepted observation to
// finish. Await waits for each observation before the next, so one that
// hangs on a member which accepts connections but does not answer yet (a
// just-started etcd) holds every later look back by up to answerWithin:
// the time it measures is then the observer's, not the cluster's.
func AwaitOverlapping(cli *clientv3.Client, d, every time.Duration, ok func(Observation) string) (Observation, error) {
	const maxInFlight = 8
	deadline := time.Now().Add(d)
	type result struct {
		o   Observation
		why string
	}
	results := make(chan result, maxInFlight)
	inFlight, why := 0, "no observation finished"
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := func() {
		inFlight++
		go func() {
			o := Observe(cli)
			r := result{o: o}
			if o.Err != nil {
				r.why = o.Err.Error()
			} else {
				r.why = ok(o)
			}
			results <- r
		}()
	}
	start()
	for {
		select {
		case r := <-results:
			inFlight--
			if r.why == "" {
				// The others finish into the buffered channel and are
				// dropped with it.
				return r.o, nil
			}
			why = r.why
		case <-tick.C:
			if time.Now().After(deadline) {
				return Observation{}, fmt.Errorf("not within %s: %s", d, why)
			}
			if inFlight < maxInFlight {
				start()
			}
		}
	}
}

// Answered is the condition of Await that any answered observation meets.
func Answered(Observation) string { return "" }

// WaitVoters waits until the cluster consists of exactly the named
// members, all healthy voters, and returns their IDs by name.
func (c *Cluster) WaitVoters(d time.Duration, names ...string) map[string]uint64 {
	c.t.Helper()
	o, err := Await(c.Client(names...), d, 300*time.Millisecond, func(o Observation) string {
		_, why := o.ExactVoters(names...)
		return why
	})
	if err != nil {
		c.t.Fatalf("cluster did not converge to healthy voters %v: %v", names, err)
	}
	ids, _ := o.ExactVoters(names...)
	return ids
}
